"""Writes a word-level Hugging Face tokenizer to DIR, for aiperf on a machine without the Hub.

The mock LLM's tokens are words; a word-level tokenizer over the words aiperf's prompt corpus
and the mock's vocabulary use makes aiperf's token counts match the server's.
Usage: word_tokenizer.py DIR
"""

import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

# The mock LLM's vocabulary (dataplane/src/engines/mocker/mocker.ts), one word per token.
WORDS = (  # noqa: SIM905  (a sentence of words reads better than a 20-line list)
    "the model token stream kernel tensor batch cluster gateway latency router cache prefill decode replica shard"
    " queue sample prompt context"
).split()
vocabulary = {"[UNK]": 0}
for word in WORDS + [chr(code) for code in range(33, 127)]:
    vocabulary.setdefault(word, len(vocabulary))
tokenizer = Tokenizer(models.WordLevel(vocab=vocabulary, unk_token="[UNK]"))
tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer.decoder = decoders.WordPiece(prefix="##")
PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]").save_pretrained(sys.argv[1])
