"""CRM's question rules (builders/crm/sources.py `QUESTION_RULES`, `crm_kinds`): held-out cases of issue 29's audit.

- One colour only: COCO 387's black smartphone shows a blue picture on its screen; the shared generator names it
  blue (49 % of its pixels), a careful annotator rejected it in CRM's and MCoT's audits. question_cases/ holds a
  crop around the phone with its annotation shifted to it (licence NC; no other object of the image is needed).
- Whole objects: a salad server (COCO 196) whose handle runs past its box, an oven (338) whose box leaves the
  stovetop: count, present existence and relation ask only about objects standing whole in their boxes; a fitted
  appliance is not asked its colour (338's stainless range named black).
- Usually small kinds: a present count or existence about a category whose boxes across the source are mostly
  under min_counted_area (cars, knives, clocks, chairs in the 128-image sample; books, cups, persons in the
  embedded one) leaves smaller, unannotated twins visible or is a fragment nobody can name: the audit rejected
  "1 car" with a white pickup behind it (COCO 64), a knife that is a blurred blade edge at a corner (194), a
  chair that reads as a bench (623), a book with a leaflet beside it (127). question_cases/ holds a crop of
  COCO 194 (licence BY-SA) with its annotations and the boxes of the sample's other knives.
- Usually alone, from the shipped COCO table (builders/coco_kinds.py): a kind that usually comes in groups keeps
  unannotated twins beside the annotated ones: the plush turtle beside COCO 643's two teddy bears, the blurred
  second bicycle down the street of 74 (whose one bicycle is large, so the embedded sample's own median kept it),
  a slatted seat under 136's "no chair".
- Table things (`table_thing`): no count, present existence or relation about food, dishes and kitchen
  appliances, whose look-alikes stay beside the masked boxes and whose annotations stop short (a tap pouring over
  COCO 138's sink, in question_cases/; a second microwave on the counter of the embedded sample's 294).
- Colour of a small lone object (`COLOR_RULES`): "the X" of a colour question may cover less than 1 % of the image
  when its kind is usually alone (a black game remote in the hand of the embedded sample's 446, a white frisbee in
  the air, a white remote in a seated man's hand, accepted by eye); counts, presence and relations keep the floor.
- "No X" only about a kind usually covering MIN_ABSENT_AREA, sharing its supercategory with nothing in the scene
  and holding none of its things (`crm_absent`): a bowl on the busy counters of 338, box appliances beside its oven
  read as a microwave, an upholstered seat among 536's chairs as a couch, the table under 92's plate of cake.
- Objects under MIN_ASKED_AREA (`small_evidence`): no count, present existence or relation about an object covering
  under 1.5 % of the image: the embedded sample's two teddy bears of 643 beside an unannotated plush turtle (refused
  by the kind table too, so held out of this rule's own effect).
- Loose kinds (`LOOSE_KINDS`, `loose_kind`): nothing about potted plants, whose COCO name covers any plant, planter or
  flower box: the embedded sample's five hanging terrariums of 446, three annotated (held out: refused by the 1.5 %
  floor too), and 49's flower box beside a brush trough that reads as a second planter.
"""
from __future__ import annotations

from pathlib import Path

from mmfaith.builders.coco_kinds import COCO_KINDS
from mmfaith.builders.coco_questions import (ALONE_SHARE, CategoryContext, KindStats, QuestionRules, kind_stats,
                                             scene_questions, the_one)
from mmfaith.builders.coco_source import CocoSource, embedded_sample
from mmfaith.builders.crm.sources import (COLOR_RULES, HOLDS, MIN_ABSENT_AREA, QUESTION_RULES, TABLE_SUPERCATEGORIES,
                                         LOOSE_KINDS, MIN_ASKED_AREA, coco_candidates, crm_absent, crm_kinds, crm_questions,
                                         loose_kind, small_evidence, table_thing)
from mmfaith.images import read_rgb

CASES = Path(__file__).parent / "question_cases"


def test_a_phone_whose_screen_shows_a_blue_picture_gets_no_colour_question() -> None:
    source = CocoSource(CASES / "instances_387.json", CASES)
    scene = source.scene(387)
    shared = scene_questions(scene, read_rgb(scene.path), 0, ("color",), QuestionRules())
    assert [q.facts["color"] for q in shared] == ["blue"]  # what the shared rules alone would ask
    assert scene_questions(scene, read_rgb(scene.path), 0, ("color",), QUESTION_RULES) == []
    assert [c.key for c in coco_candidates(source, 0, ("color",), allow_noderivs=True)] == []


def test_a_knife_of_a_usually_small_kind_is_not_asked_present() -> None:
    # COCO 194's knife: a blurred blade edge under the pizza at the corner (audit: ambiguous target). Large enough
    # here (8.5 % of the crop), but knives cover 0.67 % of their images by median in the 128-image sample.
    source = CocoSource(CASES / "instances_194.json", CASES)
    scene = source.scene(194)
    rgb = read_rgb(scene.path)
    typical = crm_kinds(CategoryContext(source))
    assert typical["knife"].median_area < QUESTION_RULES.min_counted_area < typical["pizza"].median_area
    shared = {q.key for q in scene_questions(scene, rgb, 0, ("count", "existence"), QUESTION_RULES)}
    assert {"count:194:698870", "existence:194:698870"} <= shared  # the size rules alone ask it
    crm = {q.key for q in scene_questions(scene, rgb, 0, ("count", "existence"), QUESTION_RULES, kinds=typical)}
    assert crm == shared - {"count:194:698870", "existence:194:698870"}


def test_crm_asks_count_and_existence_only_about_usually_large_lone_kinds() -> None:
    # The embedded sample: its book of COCO 127 (a leaflet beside it stayed visible under the mask, audit reject)
    # is no longer asked, nor its teddy bears (643) and bicycle (74); microwaves (usually large, usually alone) are.
    embedded = CocoSource(*embedded_sample())
    kinds = crm_kinds(CategoryContext(embedded))
    candidates = list(coco_candidates(embedded, 0, ("count", "existence"), per_image=12, allow_noderivs=True))
    keys = {c.key for c in candidates}
    assert "coco:existence:127:1137241" not in keys and kinds["book"].median_area < QUESTION_RULES.min_counted_area
    assert "coco:existence:74:1774" in keys  # the dog: usually large, usually alone
    assert all(kinds[c.facts["category"]].median_area >= QUESTION_RULES.min_counted_area
               and kinds[c.facts["category"]].alone_share >= ALONE_SHARE for c in candidates)


def test_crm_counts_only_objects_standing_whole_in_their_boxes() -> None:
    # Issue 29's audit, looked at by eye: the "fork" of COCO 196 is a salad server whose metal handle runs on past
    # its annotated box (its mask fills 0.24 of the box) and stays visible under the mask; the oven of COCO 338 is
    # the front of a range whose stovetop, kettle and hood stay above its box. Both were asked by the other rules.
    # Without a kind table (`kinds`), so that only the rules differ.
    embedded = CocoSource(*embedded_sample())
    # The oven's relation to the clock (its stovetop shows where the range is) goes the same way.
    for key in ("existence:196:1890035", "existence:338:1123956", "relation:338:339566+1123956"):
        scene = embedded.scene(int(key.split(":")[1]))
        rgb = read_rgb(scene.path)
        other_rules = QuestionRules(one_color_only=True)
        templates = ("existence", "relation")
        assert key in {q.key for q in scene_questions(scene, rgb, 0, templates, other_rules)}
        assert key not in {q.key for q in scene_questions(scene, rgb, 0, templates, QUESTION_RULES)}


def test_crm_asks_no_colour_of_a_fitted_appliance() -> None:
    # Issue 29's audit: the stainless range of COCO 338 (silver front, black grates) was named black, a teal stove
    # with a black cooktop (138) black too; the one-colour rule alone still asks the range's colour.
    embedded = CocoSource(*embedded_sample())
    scene = embedded.scene(338)
    rgb = read_rgb(scene.path)
    asked = scene_questions(scene, rgb, 0, ("color",), QuestionRules(one_color_only=True))
    assert [q.facts["color"] for q in asked if q.facts["category"] == "oven"] == ["black"]
    assert not [q for q in scene_questions(scene, rgb, 0, ("color",), QUESTION_RULES) if q.facts["category"] == "oven"]


def test_kind_stats_counts_images_median_boxes_and_lone_images() -> None:
    # By hand: cats in images 1 (one, 10x10 of 100x100 = 0.01) and 2 (two, 0.04 and 0.09 of 100x100, one crowd
    # region of 0.25 left out of the areas but counted as an instance): images 2, median of (0.01, 0.04, 0.09) =
    # 0.04, alone in 1 of 2 images = 0.5. The dog: one image, alone, area 0.5.
    dataset = {"categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}],
               "images": [{"id": 1, "width": 100, "height": 100}, {"id": 2, "width": 100, "height": 100}],
               "annotations": [{"image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10]},
                               {"image_id": 2, "category_id": 1, "bbox": [0, 0, 20, 20]},
                               {"image_id": 2, "category_id": 1, "bbox": [0, 0, 30, 30]},
                               {"image_id": 2, "category_id": 1, "bbox": [0, 0, 50, 50], "iscrowd": 1},
                               {"image_id": 1, "category_id": 2, "bbox": [0, 0, 50, 100]}]}
    assert kind_stats(dataset) == {"cat": KindStats(2, 0.04, 0.5), "dog": KindStats(1, 0.5, 1.0)}


def test_crm_reads_the_shipped_coco_table_over_the_source_median() -> None:
    # COCO 74's one bicycle covers 18 % of its image, so the embedded sample's own statistics call bicycles large
    # and alone; the shipped table (128 COCO images) says small and in groups, and a blurred second bicycle down the
    # street stayed visible under the mask (audit reject). A category the table lacks keeps the source's figures.
    embedded = CocoSource(*embedded_sample())
    context = CategoryContext(embedded)
    assert context.kinds["bicycle"] == KindStats(1, context.kinds["bicycle"].median_area, 1.0)
    assert context.kinds["bicycle"].median_area > 0.18 and COCO_KINDS["bicycle"].median_area < 0.01
    kinds = crm_kinds(context)
    assert kinds["bicycle"] == COCO_KINDS["bicycle"]
    assert crm_kinds(context) == {**context.kinds, **COCO_KINDS} and set(context.kinds) <= set(kinds)
    scene = embedded.scene(74)
    rgb = read_rgb(scene.path)
    own = {q.key for q in scene_questions(scene, rgb, 0, ("count", "existence"), QUESTION_RULES, kinds=context.kinds)}
    shipped = {q.key for q in scene_questions(scene, rgb, 0, ("count", "existence"), QUESTION_RULES, kinds=kinds)}
    assert {"count:74:128367", "existence:74:128367"} <= own
    assert not {"count:74:128367", "existence:74:128367"} & shipped


def test_crm_asks_nothing_of_a_kind_usually_in_groups() -> None:
    # Held out from issue 29's audit, looked at by eye: COCO 643's two annotated teddy bears sit beside an
    # unannotated green plush turtle ("2" and "yes" under the masks were wrong); 136's "no chair" beside a slatted
    # wooden seat at the border could not be confirmed. Teddy bears and chairs come in groups in COCO images (the
    # shipped table: alone in a third of the images holding them), and the other size rules still ask both.
    embedded = CocoSource(*embedded_sample())
    kinds = crm_kinds(CategoryContext(embedded))
    assert kinds["teddy bear"].alone_share < ALONE_SHARE and kinds["chair"].alone_share < ALONE_SHARE
    assert kinds["teddy bear"].median_area >= QUESTION_RULES.min_counted_area
    context = CategoryContext(embedded)
    for image_id, keys in ((643, {"count:643:1161056+1995692", "existence:643:1161056+1995692"}),
                           (136, {"existence:136:absent:chair"})):
        scene = embedded.scene(image_id)
        rgb = read_rgb(scene.path)
        absent = context.plausible_absent(scene)
        size_rules = {q.key for q in scene_questions(scene, rgb, 0, ("count", "existence"), QUESTION_RULES,
                                                     absent=absent)}
        crm = {q.key for q in scene_questions(scene, rgb, 0, ("count", "existence"), QUESTION_RULES, absent=absent,
                                              kinds=kinds)}
        assert keys <= size_rules and not keys & crm


def test_crm_calls_no_small_object_the_x() -> None:
    # Held out from issue 29's audit, looked at by eye: COCO 138's "vase" is a small terracotta jug (0.43 % of the
    # image) beside a larger, unannotated jug on the shelf, and the same jug shows again in an inset: "What color is
    # the vase?" and "Is the clock to the left or to the right of the vase?" have no one object to answer about. A
    # colour or relation question names "the X" only about an object covering min_counted_area, as counts do.
    # (No rule asks a vase's colour since issue 29's sixth round, builders/targets.py; the relations show the size
    # rule.) question_cases/ holds the image unchanged (NoDerivs).
    source = CocoSource(CASES / "instances_138.json", CASES)
    scene = source.scene(138)
    rgb = read_rgb(scene.path)
    the_vase = {"relation:138:334392+1670100", "relation:138:714632+1670100", "relation:138:1132075+1670100"}
    shared = {q.key for q in scene_questions(scene, rgb, 0, ("color", "relation"), QUESTION_RULES)}
    assert the_vase <= shared and not any(key.startswith("color:") for key in shared)  # the other rules ask them
    kinds = crm_kinds(CategoryContext(source))
    assert kinds["vase"].alone_share >= ALONE_SHARE  # usually alone: the size is what refuses it
    crm = {q.key for q in scene_questions(scene, rgb, 0, ("color", "relation"), QUESTION_RULES, kinds=kinds)}
    assert crm and not crm & the_vase
    assert [c.key for c in coco_candidates(source, 0, ("relation",), allow_noderivs=True)
            if "1670100" in c.key] == []


def test_crm_asks_no_count_or_presence_of_food_dishes_or_kitchen_appliances() -> None:
    # Held out from issue 29's audit, looked at by eye: the sink of COCO 138 (question_cases/, NoDerivs) was masked,
    # but the tap pouring water above its box and the skirted cabinet under it still showed a sink; the microwave
    # of the embedded sample's 294 was masked beside a second, unannotated black microwave on the counter. The
    # other rules ask both; a dog (74) is still asked.
    embedded = CocoSource(*embedded_sample())
    for source, key in ((CocoSource(CASES / "instances_138.json", CASES), "existence:138:1132075"),
                        (embedded, "existence:294:1118968")):
        context = CategoryContext(source)
        scene = source.scene(int(key.split(":")[1]))
        asked = {q.key: q for q in scene_questions(scene, read_rgb(scene.path), 0, ("count", "existence"),
                                                   QUESTION_RULES, kinds=crm_kinds(context))}
        count_key = key.replace("existence", "count")
        assert {key, count_key} <= set(asked)
        assert context.supercategory[asked[key].facts["category"]] in TABLE_SUPERCATEGORIES
        assert table_thing(asked[key], context.supercategory) and table_thing(asked[count_key], context.supercategory)
        made = {c.key for c in coco_candidates(source, 0, ("count", "existence"), per_image=12, allow_noderivs=True)}
        assert not {f"coco:{key}", f"coco:{count_key}"} & made
    dog = next(q for q in scene_questions(embedded.scene(74), read_rgb(embedded.scene(74).path), 0, ("existence",),
                                          QUESTION_RULES) if q.key == "existence:74:1774")
    assert not table_thing(dog, CategoryContext(embedded).supercategory)


def test_crm_asks_no_relation_of_a_sink_whose_tap_shows_where_it_is() -> None:
    # Held out from issue 29's audit, looked at by eye: "Is the sink to the left or to the right of the clock?" in
    # COCO 138 (question_cases/): the sink's box is masked, but its tap above and its skirted cabinet below still
    # show where it is. The other rules ask it.
    source = CocoSource(CASES / "instances_138.json", CASES)
    context = CategoryContext(source)
    scene = source.scene(138)
    asked = scene_questions(scene, read_rgb(scene.path), 0, ("relation",), QUESTION_RULES, kinds=crm_kinds(context))
    assert [(q.key, q.facts["subject"]) for q in asked] == [("relation:138:334392+1132075", "sink")]
    assert table_thing(asked[0], context.supercategory)
    assert list(coco_candidates(source, 0, ("relation",), allow_noderivs=True)) == []


def test_crm_asks_no_absent_kind_that_is_small_or_kin_to_the_scene() -> None:
    # Held out from issue 29's audit, looked at by eye: "no bowl" on the busy counters of COCO 338 (bowls cover
    # 2.5 % of their images by median), "no microwave" beside its oven and refrigerator (box appliances on its
    # shelves read as one), "no couch" among 536's chairs (an upholstered seat under two dresses). Each was
    # plausible for its scene; none is asked now, while large kinds foreign to the scene are.
    embedded = CocoSource(*embedded_sample())
    context = CategoryContext(embedded)
    kinds = crm_kinds(context)
    assert kinds["bowl"].median_area < MIN_ABSENT_AREA <= kinds["microwave"].median_area
    expected = {338: {"airplane", "cake", "cat", "couch", "dining table", "dog", "giraffe", "horse"},
                536: {"airplane", "cake", "cat", "dog", "giraffe", "horse", "microwave", "oven", "refrigerator"}}
    made = {c.key for seed in (0, 1)
            for c in coco_candidates(embedded, seed, ("existence",), per_image=12, allow_noderivs=True)}
    for image_id, refused in ((338, {"bowl", "microwave"}), (536, {"couch"})):
        scene = embedded.scene(image_id)
        plausible = set(context.plausible_absent(scene))
        kept = set(crm_absent(context, scene, kinds))
        assert refused <= plausible - kept and kept == expected[image_id] and kept <= plausible
        assert not {f"coco:existence:{image_id}:absent:{category}" for category in refused} & made
        assert {f"coco:existence:{image_id}:absent:{category}" for category in kept} & made


def test_crm_asks_no_dining_table_absent_where_food_or_dishes_stand() -> None:
    # Held out from issue 29's audit, looked at by eye: "no dining table" under a close-up of cake on a plate (the
    # embedded sample's 92: the plate stands on a table just out of view), beside a wine tasting's barrel top (308),
    # a kitchen's work table (486) and a pizza rack's steel top (620). COCO's "dining table" is any table; it holds
    # food and dishes, so it is not asked absent where they are, and is where they are not (the kitchen of 338).
    embedded = CocoSource(*embedded_sample())
    context = CategoryContext(embedded)
    kinds = crm_kinds(context)
    assert HOLDS["dining table"] == {"food", "kitchen"}
    assert {context.supercategory[category] for category in ("cake", "fork")} <= HOLDS["dining table"]
    plate = embedded.scene(92)
    assert "dining table" in context.plausible_absent(plate) and kinds["dining table"].median_area >= MIN_ABSENT_AREA
    assert "dining table" not in crm_absent(context, plate, kinds)
    assert "dining table" in crm_absent(context, embedded.scene(338), kinds)


def test_crm_asks_the_colour_of_a_small_lone_object_and_counts_it_by_the_floor() -> None:
    # Held out from issue 29's audit, looked at by eye: the black game remote in the woman's hand of the embedded
    # sample's 446 (0.3 % of the image; NoDerivs, so only with allow_noderivs) was accepted as "black" before the 1 %
    # floor of round 10 refused it, as were a white frisbee in the air (COCO 625) and a white remote in a seated
    # man's hand (241) of the 128-image sample. CRM asks its colour again; the floor still holds for the other
    # templates, and a kind that usually comes in groups is still not "the X" at any size.
    embedded = CocoSource(*embedded_sample())
    context = CategoryContext(embedded)
    kinds = crm_kinds(context)
    scene = embedded.scene(446)
    rgb = read_rgb(scene.path)
    remote = next(inst for inst in scene.instances if inst.category == "remote")
    area = remote.bbox[2] * remote.bbox[3] / (scene.width * scene.height)
    assert COLOR_RULES.min_counted_area <= area < QUESTION_RULES.min_counted_area
    assert not the_one(kinds, remote, scene, QUESTION_RULES) and the_one(kinds, remote, scene, COLOR_RULES)
    assert [q.key for q in scene_questions(scene, rgb, 0, ("color",), QUESTION_RULES, kinds=kinds)] == []
    asked = crm_questions(scene, rgb, 0, ("color", "count", "existence", "relation"), context, kinds)
    assert [(q.key, q.facts["color"]) for q in asked if q.template == "color"] == [("color:446:1108431", "black")]
    others = [q.key for q in scene_questions(scene, rgb, 0, ("count", "existence", "relation"), QUESTION_RULES,
                                             absent=crm_absent(context, scene, kinds), kinds=kinds)
              if not table_thing(q, context.supercategory) and not loose_kind(q) and not small_evidence(q, scene)]
    assert [q.key for q in asked if q.template != "color"] == others  # every other template: QUESTION_RULES
    made = {c.key for c in coco_candidates(embedded, 0, ("color",), per_image=4, allow_noderivs=True)}
    assert "coco:color:446:1108431" in made
    assert "coco:color:446:1108431" not in {c.key for c in coco_candidates(embedded, 0, ("color",), per_image=4)}
    grouped = {**kinds, "remote": KindStats(kinds["remote"].images, kinds["remote"].median_area, ALONE_SHARE / 2)}
    assert not [q for q in crm_questions(scene, rgb, 0, ("color",), context, grouped) if q.template == "color"]



def test_crm_asks_no_count_presence_or_relation_of_an_object_under_the_asked_area() -> None:
    # Held out: the embedded sample's teddy bears of 643 beside an unannotated plush turtle (1.17 % of the image),
    # rejected by eye in earlier rounds; the shared rules alone ask them, `small_evidence` refuses them whatever the
    # kind table says, and leaves 74's large dog, 294's microwave, colour and "no X" alone.
    embedded = CocoSource(*embedded_sample())
    context = CategoryContext(embedded)
    asked: dict[str, bool] = {}
    for image_id in (294, 643, 74):
        scene = embedded.scene(image_id)
        rgb = read_rgb(scene.path)
        for question in scene_questions(scene, rgb, 0, ("color", "count", "existence", "relation"), QUESTION_RULES,
                                        absent=context.plausible_absent(scene)):
            asked[question.key] = small_evidence(question, scene)
            if question.template == "color" or (question.template == "existence" and question.facts["count"] == 0):
                assert not asked[question.key]
            else:
                smallest = min(i.bbox[2] * i.bbox[3] for i in question.evidence) / (scene.width * scene.height)
                assert asked[question.key] == (smallest < MIN_ASKED_AREA)
    assert not asked["count:294:1118968"] and not asked["relation:294:1118968+470246"]
    assert asked["count:643:1161056+1995692"] and asked["existence:643:1161056+1995692"]
    assert not asked["count:74:1774"] and not asked["existence:74:1774"]
    kinds = crm_kinds(context)
    for image_id in (294, 643, 74):
        scene = embedded.scene(image_id)
        crm = crm_questions(scene, read_rgb(scene.path), 0, ("count", "existence", "relation"), context, kinds)
        assert not any(small_evidence(question, scene) for question in crm)


def test_crm_asks_nothing_about_a_loose_kind() -> None:
    # The shared rules ask how many potted plants 446 (hanging terrariums: five in view, three annotated; held out)
    # and 49 (a flower box beside a brush trough that reads as a planter) hold; CRM asks nothing about them, and
    # keeps 74's dog.
    embedded = CocoSource(*embedded_sample())
    context = CategoryContext(embedded)
    kinds = crm_kinds(context)
    assert LOOSE_KINDS == {"potted plant"}
    for image_id, loose in ((446, {"count:446:1954953+1955796+2128182", "existence:446:1954953+1955796+2128182"}),
                            (49, {"count:49:1609247", "existence:49:1609247"}), (74, set())):
        scene = embedded.scene(image_id)
        rgb = read_rgb(scene.path)
        shared = scene_questions(scene, rgb, 0, ("color", "count", "existence", "relation"), QUESTION_RULES,
                                 absent=context.plausible_absent(scene))
        assert {q.key for q in shared if loose_kind(q)} == loose
        assert all(("potted plant" in (q.facts.get("category"), q.facts.get("subject"), q.facts.get("reference")))
                   == loose_kind(q) for q in shared)
        crm = crm_questions(scene, rgb, 0, ("color", "count", "existence", "relation"), context, kinds)
        assert not any(loose_kind(q) for q in crm)
    assert "coco:count:74:1774" in {c.key for c in coco_candidates(embedded, 0, ("count",), per_image=4)}
