"""Whisper tokens from the shipped ``tokenizer.json`` (Hugging Face ``tokenizers``).

Special token ids are looked up by name, never hard-coded, so a checkpoint
with a different vocabulary layout still works. Suppression lists come from
the model's ``config.json`` (CTranslate2 ships them there).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from pipeline.asr.errors import WeightsError


@dataclass(frozen=True)
class SpecialTokens:
    eot: int
    sot: int
    transcribe: int
    no_speech: int
    no_timestamps: int
    timestamp_begin: int  # id of <|0.00|>; later ids step by 0.02 s
    languages: dict[str, int]  # "en" -> id of <|en|>
    sot_prev: int = -1  # <|startofprev|>: opens an initial prompt


class WhisperTokenizer:
    """Text <-> ids plus the special tokens decoding needs."""

    def __init__(self, tokenizer_json: Path, config_json: Path) -> None:
        self._tok = Tokenizer.from_file(str(tokenizer_json))
        config = json.loads(config_json.read_text())
        self.suppress_ids: tuple[int, ...] = tuple(config.get("suppress_ids", ()))
        self.suppress_ids_begin: tuple[int, ...] = tuple(config.get("suppress_ids_begin", ()))
        # (decoder layer, head) pairs whose cross-attention follows the audio; CTranslate2 ships
        # them per checkpoint (for Whisper base the same 8 heads openai/whisper lists)
        self.alignment_heads: tuple[tuple[int, int], ...] = tuple(
            (int(layer), int(head)) for layer, head in config.get("alignment_heads", ()))
        lang_ids = config.get("lang_ids") or self._scan_languages()
        languages = {self._tok.id_to_token(i).strip("<|>"): i for i in lang_ids}
        self.special = SpecialTokens(
            eot=self._id("<|endoftext|>"),
            sot=self._id("<|startoftranscript|>"),
            transcribe=self._id("<|transcribe|>"),
            no_speech=self._first_id("<|nospeech|>", "<|nocaptions|>"),
            no_timestamps=self._id("<|notimestamps|>"),
            # tokenizer.json files often omit the 1501 timestamp tokens: they follow <|notimestamps|>
            timestamp_begin=self._tok.token_to_id("<|0.00|>") or self._id("<|notimestamps|>") + 1,
            languages=languages,
            sot_prev=self._tok.token_to_id("<|startofprev|>") or -1,
        )

    def _id(self, token: str) -> int:
        idx = self._tok.token_to_id(token)
        if idx is None:
            raise WeightsError(f"tokenizer.json has no {token}")
        return idx

    def _first_id(self, *tokens: str) -> int:
        for token in tokens:
            if (idx := self._tok.token_to_id(token)) is not None:
                return idx
        raise WeightsError(f"tokenizer.json has none of {tokens}")

    def _scan_languages(self) -> list[int]:
        sot = self._id("<|startoftranscript|>")
        ids = []
        for idx in range(sot + 1, sot + 120):
            token = self._tok.id_to_token(idx)
            if token is None or token in ("<|translate|>", "<|transcribe|>"):
                break
            ids.append(idx)
        return ids

    def language_id(self, code: str) -> int:
        if code not in self.special.languages:
            raise WeightsError(f"language {code!r} is not in this model's vocabulary")
        return self.special.languages[code]

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def piece(self, ids: list[int]) -> str:
        """Text of text-token ids as written, leading space kept ("\ufffd" where ids split a character)."""
        return self._tok.decode(ids)

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``, dropping anything at or above the end-of-text id."""
        return self._tok.decode([i for i in ids if i < self.special.eot]).strip()
