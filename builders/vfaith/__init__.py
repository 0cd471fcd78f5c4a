"""VFaith's builder: COCO questions (builders/coco_questions.py) whose one cue is edited so the answer flips."""
