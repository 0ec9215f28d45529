"""Writes examples/tokenizer/: a word-level Hugging Face tokenizer for the mock LLMs.

The mock LLM's tokens are words; a word-level tokenizer over the words aiperf's and
genai-perf's prompt corpora and the mock's vocabulary use makes their token counts match the
server's, on a machine without the Hugging Face Hub. tokenizer_config.json names
PreTrainedTokenizerFast, which transformers 4 and 5 both load with AutoTokenizer.
Usage: make_word_tokenizer.py [DIR]   (default: examples/tokenizer next to this folder)
"""

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

# The words as one string, written as the mocker's list is (dataplane/src/engines/mocker.ts).
WORDS = (  # noqa: SIM905
    "the model token stream kernel tensor batch cluster gateway latency router cache prefill decode "
    "replica shard queue sample prompt context"
).split()
CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 1_000_000}


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tokenizer"
    vocabulary = {"[UNK]": 0}
    for word in WORDS + [chr(code) for code in range(33, 127)]:
        vocabulary.setdefault(word, len(vocabulary))
    tokenizer = Tokenizer(models.WordLevel(vocab=vocabulary, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"), pretty=True)
    (out / "tokenizer_config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")


if __name__ == "__main__":
    main()
