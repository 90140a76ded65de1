"""dlmeval's tiny Dream stand-in tokenizer: a *slow* tokenizer (like Dream's ``DreamTokenizer``, which has no fast
version), so ``return_offsets_mapping`` is not available. Word level: lower-cased words and punctuation marks."""

import json
import os
import re

from transformers import PreTrainedTokenizer

_WORD = re.compile(r"\w+|[^\w\s]")


class TinyDreamTokenizer(PreTrainedTokenizer):
    vocab_files_names = {"vocab_file": "vocab.json"}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(
        self,
        vocab_file,
        unk_token="<|unk|>",
        bos_token="<|beginoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        mask_token="<|mask|>",
        **kwargs,
    ):
        with open(vocab_file, encoding="utf-8") as f:
            self.encoder = json.load(f)
        self.decoder = {v: k for k, v in self.encoder.items()}
        super().__init__(
            unk_token=unk_token,
            bos_token=bos_token,
            eos_token=eos_token,
            pad_token=pad_token,
            mask_token=mask_token,
            **kwargs,
        )

    @property
    def vocab_size(self):
        return len(self.encoder)

    def get_vocab(self):
        return dict(self.encoder)

    def _tokenize(self, text, **kwargs):
        return _WORD.findall(text.lower())

    def _convert_token_to_id(self, token):
        return self.encoder.get(token, self.encoder[str(self.unk_token)])

    def _convert_id_to_token(self, index):
        return self.decoder.get(index, str(self.unk_token))

    def convert_tokens_to_string(self, tokens):
        return re.sub(r" ([.,?!'])", r"\1", " ".join(tokens))

    def save_vocabulary(self, save_directory, filename_prefix=None):
        path = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + "vocab.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.encoder, f)
        return (path,)
