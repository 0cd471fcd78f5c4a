"""Option groups several families' verbs share, written once: a COCO source, inpainting and its gates (builds),
and an LLM judge (scores). Each `add_*` adds the flags to a parser or group; the matching reader turns the
parsed values into what the stage takes. Nothing here imports a family's code, and nothing heavy: the
parsers are built at start-up.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mmfaith.builders.inpainters import InpainterSpec
    from mmfaith.clients import ModelEndpoint

Group = argparse.ArgumentParser | argparse._ArgumentGroup
INPAINTERS = ("auto", "lama", "patchmatch", "telea", "ns")


def add_coco_source_options(group: Group, images_help: str = "folder of the images the annotations list",
                            edits: str = "edit") -> None:
    """--coco-annotations, --images and --allow-noderivs (neither source flag: the embedded COCO sample)."""
    group.add_argument("--coco-annotations", type=Path, metavar="FILE", help="COCO instances JSON (default: embedded sample)")
    group.add_argument("--images", type=Path, metavar="DIR", help=images_help)
    group.add_argument("--allow-noderivs", action="store_true",
                       help=f"also {edits} images whose license forbids derivatives (you then may not publish them)")


def add_inpaint_options(group: Group, edited: str = "the edited region") -> None:
    """The inpainter and the gates every edit passes: --inpainter, --lama-model, --min-delta-e,
    --min-fill-texture, --dilation (read with `inpainting`)."""
    group.add_argument("--inpainter", choices=INPAINTERS, default="auto",
                       help="auto: LaMa when --lama-model/LAMA_MODEL names a checkpoint, else PatchMatch "
                            "(textured, offline), else OpenCV Telea")
    group.add_argument("--lama-model", metavar="FILE", help="big-lama.pt TorchScript checkpoint (or set LAMA_MODEL)")
    group.add_argument("--min-delta-e", type=float, default=12.0, help=f"visibility gate: mean delta E over {edited}")
    group.add_argument("--min-fill-texture", type=float, default=None, metavar="RATIO",
                       help="fill gate: texture inside a filled hole over its surround (default 0.3; 0 turns it off)")
    group.add_argument("--dilation", type=int, default=7, help="pixels the inpainting hole grows beyond the mask")


def inpainting(args: argparse.Namespace) -> tuple[InpainterSpec, float]:
    """The inpainter `add_inpaint_options` chose and the fill gate's ratio (its default when not given)."""
    from mmfaith.builders.gates import MIN_FILL_TEXTURE
    from mmfaith.builders.inpainters import resolve_inpainter

    fill = MIN_FILL_TEXTURE if args.min_fill_texture is None else args.min_fill_texture
    return resolve_inpainter(args.inpainter, args.lama_model), fill


def add_judge_options(parser: argparse.ArgumentParser, title: str, judged: str, agreement: str | None,
                      default: str = "rule") -> argparse._ArgumentGroup:
    """The `title` group: --judge (`default`, offline, or a model name), --judge-base-url, --judge-provider,
    --judge-api-key-env and, unless `agreement` is None, --judge-workers and --judge-agreement (`agreement` says
    what it compares); returned so a family can add its own judge flags."""
    judge = parser.add_argument_group(title)
    judge.add_argument("--judge", default=default, metavar=f"{default}|MODEL",
                       help=f"{default} (deterministic, offline) or the model name of an LLM judge of {judged}")
    judge.add_argument("--judge-base-url", metavar="URL",
                       help="OpenAI-compatible base URL of the judge (e.g. http://HOST:PORT/v1)")
    judge.add_argument("--judge-provider", choices=("openai", "gemini"), default="openai",
                       help="protocol of the judge's server: OpenAI-compatible (e.g. vLLM) or Gemini")
    judge.add_argument("--judge-api-key-env", metavar="NAME",
                       help="environment variable holding the judge's key (default OPENAI_API_KEY / GEMINI_API_KEY)")
    if agreement is not None:
        judge.add_argument("--judge-workers", type=int, default=4, metavar="N", help="parallel judge calls")
        judge.add_argument("--judge-agreement", action="store_true", help=f"also report {agreement}")
    return judge


def add_workers_option(parser: argparse.ArgumentParser, scored: str, note: str = "") -> None:
    """--workers N: the processes a scorer makes `scored` on (read with `ordered_pool.scoring_workers`)."""
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help=f"processes scoring {scored} side by side (default: the cores this process may use; "
                             f"the same files whatever N{note})")


def add_reader_options(parser: argparse.ArgumentParser) -> None:
    """--reader-model, --reader-base-url, --reader-api-key-env: an LLM reader of the multiple-choice replies the
    answer rules leave unread (docs/answers.md), for a family whose answers are options (read with
    `reader_endpoint`)."""
    reader = parser.add_argument_group("LLM reader of multiple-choice answers (docs/answers.md)")
    reader.add_argument("--reader-model", metavar="MODEL",
                        help="an OpenAI-compatible model that reads the replies the rules leave unread (cached; "
                             "its agreement with the rules is reported)")
    reader.add_argument("--reader-base-url", metavar="URL", help="the reader model's base URL")
    reader.add_argument("--reader-api-key-env", metavar="NAME", help="environment variable holding its key")


def reader_endpoint(args: argparse.Namespace) -> ModelEndpoint | None:
    """The `--reader-model` endpoint `add_reader_options` named, None without one."""
    if not args.reader_model:
        return None
    from mmfaith.clients import ModelEndpoint

    return ModelEndpoint("openai", args.reader_model, args.reader_base_url, args.reader_api_key_env)


def judge_endpoint(args: argparse.Namespace, offline: str = "rule") -> ModelEndpoint | None:
    """The LLM judge `add_judge_options` named, None for the offline one."""
    if args.judge == offline:
        return None
    from mmfaith.clients import ModelEndpoint

    return ModelEndpoint(args.judge_provider, args.judge, args.judge_base_url, args.judge_api_key_env)
