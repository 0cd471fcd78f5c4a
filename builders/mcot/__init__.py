"""MCoT ("thinking with images") builder: V* / HR-Bench adapters and COCO small-target questions."""
