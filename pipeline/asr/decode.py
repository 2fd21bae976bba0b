"""Batched greedy decoding over a pre-allocated key/value cache.

One call decodes a batch of encoded windows together:

1. ``<|startoftranscript|>`` alone gives the no-speech probability and, unless
   the language is forced, the language of each window (restricted to the
   configured candidates);
2. ``<|lang|><|transcribe|><|notimestamps|>`` primes text decoding;
3. greedy steps until every row emits end-of-text or reaches its token cap
   (proportional to the window's duration, which stops repetition loops early).

Finished rows stop costing compute: once enough rows have finished, the
survivors are compacted to the front of the cache buffers and the batch
shrinks. Each row's result depends only on its own window, so batched output
equals one-at-a-time output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from pipeline.asr.model import KVCache, Whisper
from pipeline.asr.tokenizer import WhisperTokenizer

PROMPT_TOKENS = 3  # <|lang|><|transcribe|><|notimestamps|> after <|startoftranscript|>


@dataclass(frozen=True)
class DecodeOptions:
    """language: force one language code, or None to detect among ``candidate_languages``
    (empty: all of the model's languages).

    compact_fraction: compact the cache when at least this share of the live
    rows has finished (0 compacts at every finish; 1 never compacts early).
    """

    language: str | None = None
    candidate_languages: tuple[str, ...] = ("zh", "en")
    max_new_tokens: int = 224
    tokens_per_s: float = 12.0
    min_tokens: int = 16
    compact_fraction: float = 0.25


@dataclass
class WindowDecode:
    """Result of one window: text token ids, language, and confidence figures."""

    tokens: list[int] = field(default_factory=list)
    language: str = ""
    language_prob: float = 0.0
    no_speech_prob: float = 0.0
    sum_logprob: float = 0.0

    @property
    def avg_logprob(self) -> float:
        return self.sum_logprob / max(1, len(self.tokens))


@dataclass
class DecodeStats:
    steps: int = 0
    row_steps: int = 0  # rows actually computed, summed over steps
    compactions: int = 0


def token_cap(duration_s: float, opts: DecodeOptions) -> int:
    """Most text tokens a window of this duration may produce."""
    return min(opts.max_new_tokens, int(opts.min_tokens + opts.tokens_per_s * duration_s))


class GreedyDecoder:
    """Greedy decoding for one model/tokenizer pair; reusable across batches."""

    def __init__(self, model: Whisper, tokenizer: WhisperTokenizer, opts: DecodeOptions) -> None:
        self.model = model
        self.tok = tokenizer
        self.opts = opts
        sp = tokenizer.special
        if opts.language is not None:
            tokenizer.language_id(opts.language)  # validate early
        # no candidates configured: every language the model knows
        self.candidates = [tokenizer.language_id(c) for c in opts.candidate_languages] or list(sp.languages.values())
        n_vocab = model.dims.n_vocab
        suppress = torch.zeros(n_vocab, dtype=torch.bool)
        suppress[list(tokenizer.suppress_ids)] = True
        suppress[sp.eot + 1 :] = True  # every special and timestamp token
        self.suppress = suppress
        self.suppress_begin = suppress.clone()
        self.suppress_begin[list(tokenizer.suppress_ids_begin)] = True
        self.lang_by_id = {v: k for k, v in sp.languages.items()}

    def decode(self, memory: Tensor, cache: KVCache, caps: list[int], stats: DecodeStats) -> list[WindowDecode]:
        """memory (B, T, D) encoder output; cache views sized for B rows -> one result per row."""
        device = memory.device
        n = memory.shape[0]
        sp = self.tok.special
        suppress = self.suppress.to(device)
        suppress_begin = self.suppress_begin.to(device)
        self.model.decoder.fill_cross_kv(memory, cache.cross_kv)
        results = [WindowDecode() for _ in range(n)]
        sot = torch.full((n, 1), sp.sot, dtype=torch.long, device=device)
        logits = self.model.decoder(sot, cache).float()
        stats.steps += 1
        stats.row_steps += n
        langs = self._languages(logits, results)
        prompt = torch.tensor(
            [[lang, sp.transcribe, sp.no_timestamps] for lang in langs], dtype=torch.long, device=device
        )
        logits = self.model.decoder(prompt, cache).float()
        rows = list(range(n))  # live position -> result index
        cap = torch.tensor(caps, device=device)
        step = 0
        while rows:
            stats.steps += 1
            stats.row_steps += len(rows)
            logits.masked_fill_(suppress_begin if step == 0 else suppress, float("-inf"))
            logprobs = torch.log_softmax(logits, dim=-1)
            nxt = logprobs.argmax(dim=-1)
            nxt = torch.where(cap <= step, torch.full_like(nxt, sp.eot), nxt)
            chosen = logprobs.gather(1, nxt[:, None])[:, 0]
            done = self._record(rows, nxt.tolist(), chosen.tolist(), results)
            step += 1
            if all(done):
                break
            n_done = sum(done)
            if n_done and n_done >= self.opts.compact_fraction * len(rows):
                keep = [i for i, d in enumerate(done) if not d]
                nxt, cap = nxt[keep], cap[keep]
                rows = [rows[i] for i in keep]
                self._compact(cache, keep)
                stats.compactions += 1
            logits = self.model.decoder(nxt[:, None], cache).float()
        return results

    def _languages(self, logits: Tensor, results: list[WindowDecode]) -> list[int]:
        """Pick each row's language token from the logits after <|startoftranscript|>."""
        sp = self.tok.special
        probs = torch.softmax(logits, dim=-1)
        no_speech = probs[:, sp.no_speech].tolist()
        if self.opts.language is not None:
            forced = self.tok.language_id(self.opts.language)
            lang_ids = [forced] * len(results)
            lang_probs = [1.0] * len(results)
        else:
            cand = torch.tensor(self.candidates, device=logits.device)
            sub = torch.softmax(logits[:, cand], dim=-1)
            best = sub.argmax(dim=-1)
            lang_ids = cand[best].tolist()
            lang_probs = sub.gather(1, best[:, None])[:, 0].tolist()
        for r, lang, p, ns in zip(results, lang_ids, lang_probs, no_speech):
            r.language, r.language_prob, r.no_speech_prob = self.lang_by_id[lang], p, ns
        return lang_ids

    def _record(self, rows: list[int], nxt: list[int], chosen: list[float], results: list[WindowDecode]) -> list[bool]:
        eot = self.tok.special.eot
        done = []
        for pos, idx in enumerate(rows):
            finished = results[idx].tokens[-1:] == [eot]
            if not finished:
                results[idx].sum_logprob += chosen[pos]
                results[idx].tokens.append(nxt[pos])
            done.append(finished or nxt[pos] == eot)
        return done

    @staticmethod
    def _compact(cache: KVCache, keep: list[int]) -> None:
        """Move live rows to the front of the cache buffers and shrink the views."""
        n = len(keep)
        idx = torch.tensor(keep, device=cache.self_kv.device)
        length = cache.length
        live_self = cache.self_kv[:, :, :, :, :length].index_select(2, idx)
        live_cross = cache.cross_kv.index_select(2, idx)
        cache.self_kv[:, :, :n, :, :length] = live_self
        cache.cross_kv[:, :, :n] = live_cross
        cache.self_kv = cache.self_kv[:, :, :n]
        cache.cross_kv = cache.cross_kv[:, :, :n]
