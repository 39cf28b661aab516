"""Renders every template in this folder over a few conversations with jinja2,
set up the way transformers' apply_chat_template sets it up, and writes what
each produced (or the exception it raised) to expected.json; the C++ renderer
is tested against that file byte for byte.

    python3 tests/data/chat_templates/render_expected.py

Needs jinja2 (3.1.x). The templates are the models' own chat_template text:
  chatml_smollm2    HuggingFaceTB/SmolLM2-135M-Instruct
  chatml_qwen2.5    Qwen/Qwen2.5-7B-Instruct
  zephyr_tinyllama  TinyLlama/TinyLlama-1.1B-Chat-v1.0 (HuggingFaceH4/zephyr-7b-beta's)
  llama3            meta-llama/Meta-Llama-3-8B-Instruct
  llama3.1          meta-llama/Llama-3.1-8B-Instruct
  llama3.2          meta-llama/Llama-3.2-3B-Instruct
  llama2            meta-llama/Llama-2-7b-chat-hf
  mistral_v0.1      mistralai/Mistral-7B-Instruct-v0.1
  mistral_v0.2      mistralai/Mistral-7B-Instruct-v0.2 (also Mixtral-8x7B-Instruct-v0.1)
  mistral_v0.3      mistralai/Mistral-7B-Instruct-v0.3
  mistral_nemo      mistralai/Mistral-Nemo-Instruct-2407
  gemma_7b          google/gemma-7b-it
  gemma2            google/gemma-2-2b-it
  gemma3            google/gemma-3-*-it
  phi3_mini         microsoft/Phi-3-mini-4k-instruct (first release)
  phi3.5_mini       microsoft/Phi-3.5-mini-instruct
"""

import json
import os
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))

# strftime_now reads this date so the expected text does not change from day
# to day; the C++ side is given the same date.
TODAY = datetime(2024, 9, 5)

# The model's bos/eos strings, by the template's file-name prefix.
TOKENS = {
    "chatml": ("", "<|im_end|>"),
    "zephyr": ("<s>", "</s>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama2": ("<s>", "</s>"),
    "mistral": ("<s>", "</s>"),
    "gemma": ("<bos>", "<eos>"),
    "phi3": ("<s>", "<|endoftext|>"),
}

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello!"}],
    "system_user": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "multi_turn": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "  Tell me a joke.  "},
    ],
    "system_multi_turn": [
        {"role": "system", "content": " Be kind. "},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": " Hello!\n"},
        {"role": "user", "content": "Bye"},
    ],
    "ends_with_assistant": [
        {"role": "user", "content": "Ping"},
        {"role": "assistant", "content": "Pong"},
    ],
    "not_alternating": [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
    ],
    "empty_system": [
        {"role": "system", "content": ""},
        {"role": "user", "content": "Hi"},
    ],
}


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def strftime_now(fmt):
    return TODAY.strftime(fmt)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    env = environment()
    out = {"today": TODAY.strftime("%d %b %Y"), "templates": {}}
    for name in sorted(f[:-6] for f in os.listdir(HERE) if f.endswith(".jinja")):
        with open(os.path.join(HERE, name + ".jinja"), encoding="utf-8", newline="") as f:
            template = env.from_string(f.read())
        bos, eos = TOKENS[next(k for k in TOKENS if name.startswith(k))]
        cases = []
        for conv_name, messages in CONVERSATIONS.items():
            for gen in (True, False):
                case = {"conversation": conv_name, "add_generation_prompt": gen}
                try:
                    case["output"] = template.render(
                        messages=messages, add_generation_prompt=gen, bos_token=bos, eos_token=eos)
                except TemplateError as e:
                    case["error"] = str(e)
                cases.append(case)
        out["templates"][name] = {"bos_token": bos, "eos_token": eos, "cases": cases}
    out["conversations"] = CONVERSATIONS
    with open(os.path.join(HERE, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
