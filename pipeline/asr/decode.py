"""Batched greedy decoding with timestamps over a pre-allocated key/value cache.

One call decodes a batch of encoded windows together; the windows may have been
encoded at different lengths (each at its own bucket), their cross-attention
keys then padded to the longest and masked, so a row attends to exactly the
positions it would attend to alone:

1. ``<|startoftranscript|>`` alone gives the no-speech probability and, unless
   the language is forced, the language of each window (restricted to the
   configured candidates);
2. ``<|lang|><|transcribe|>`` primes timestamped decoding;
3. greedy steps until every row emits end-of-text or reaches its token cap
   (proportional to the window's duration, which stops repetition loops early).

Timestamp rules (as Whisper's reference decoder applies them): the first token
is a timestamp no later than ``max_initial_timestamp_s``; timestamps come in
pairs (after a closing one only another timestamp or end-of-text, after a pair
only text); they never decrease; none lies past the window's audio; and when
the timestamp tokens together are likelier than any text token, a timestamp is
taken. Every rule is a per-row mask, so rows stay independent.

Finished rows stop costing compute: once enough rows have finished, the
survivors are compacted to the front of the cache buffers and the batch
shrinks. Each row's result depends only on its own window, so batched output
equals one-at-a-time output.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from pipeline.asr.model import KVCache, Whisper
from pipeline.asr.tokenizer import WhisperTokenizer

PROMPT_TOKENS = 2  # <|lang|><|transcribe|> after <|startoftranscript|>
TIME_STEP_S = 0.02  # one timestamp token
NEG_INF = float("-inf")
_NUMBER_CHARS = frozenset("0123456789 ,.-")  # digit groups and what separates them


# A decode stuck in a repetition loop ends there instead of at its token cap: a run of up to 8
# tokens (a digit group of up to four, each digit with its comma) said six times, or a longer one
# of up to 48 (a sentence) said twice word for word, which speech hardly does. On the engine
# benchmark's dev parts (seeds 11, 53, 59) the first pass's output stayed byte-identical and its
# decode took 358 -> 272, 210 -> 210 and 555 -> 489 steps (the loops were cut after decoding
# anyway); three number-region decodes of seed 11 had repeated a sentence five times to their caps.
LOOP_PERIOD_TOKENS = 8
PHRASE_PERIOD_TOKENS = 48


@dataclass(frozen=True)
class DecodeOptions:
    """language: force one language code, or None to detect among ``candidate_languages``
    (empty: all of the model's languages).
    foreign_below: a window where the candidates together weigh less than this among all the
    model's languages is in another language: it is decoded in the language the model hears
    (Whisper, told "English" over French, translates instead of transcribing), and flagged.

    tokens_per_s / min_tokens: the per-window token cap (text and timestamps).
    compact_fraction: compact the cache when at least this share of the live
    rows has finished (0 compacts at every finish; 1 never compacts early).
    prompt_tokens: text tokens of an initial prompt (hotwords), fed as
    ``<|startofprev|> prompt <|startoftranscript|>``; empty: no prompt.
    loop_period: a row whose last ``loop_copies`` runs of up to this many tokens are one run
    repeated is stuck in a repetition loop and ends there (its result not complete), instead of
    looping on to its token cap; 0: off.
    phrase_period / phrase_copies: likewise for a longer run (more than ``loop_period`` tokens, at
    most ``phrase_period``) said ``phrase_copies`` times: a sentence said again word for word,
    which speech hardly does and a stuck decode does until its cap; 0: off.
    temperature: 0 decodes greedily; above, each token is drawn from the distribution sharpened
    or flattened by it (a fallback for a decode stuck in a repetition loop). Every row draws from
    its own generator, seeded by ``seed``, so a row's result still depends on its window alone:
    the same in any batch, and the same every time.
    digits_after_digit: once a row has written a digit, only tokens of digits and separators,
    timestamps and end-of-text may follow: the model must say which digit it hears where it
    would write a word ("1 time, 0, 8" for "one five zero eight"), the last resort of a number
    region's decode.
    """

    language: str | None = None
    candidate_languages: tuple[str, ...] = ("zh", "en")
    foreign_below: float = 0.2
    max_new_tokens: int = 224
    tokens_per_s: float = 12.0
    min_tokens: int = 16
    compact_fraction: float = 0.25
    max_initial_timestamp_s: float = 1.0
    prompt_tokens: tuple[int, ...] = ()
    loop_period: int = 0
    loop_copies: int = 6
    phrase_period: int = 0
    phrase_copies: int = 2
    temperature: float = 0.0
    seed: int = 0
    digits_after_digit: bool = False


@dataclass(frozen=True)
class Heard:
    """The language a decode was made in, carried to a later decode of part of its window."""

    language: str
    prob: float
    foreign: bool


@dataclass
class WindowDecode:
    """Result of one window: token ids (text and timestamps, no end-of-text), language,
    confidence figures, and whether the model ended the window itself (False: token cap)."""

    tokens: list[int] = field(default_factory=list)
    language: str = ""
    language_prob: float = 0.0
    foreign: bool = False  # the language heard is none of the candidates
    no_speech_prob: float = 0.0
    sum_logprob: float = 0.0
    finished: bool = False
    complete: bool = False

    @property
    def avg_logprob(self) -> float:
        return self.sum_logprob / max(1, len(self.tokens))

    @property
    def heard(self) -> Heard:
        return Heard(self.language, self.language_prob, self.foreign)


@dataclass
class DecodeStats:
    steps: int = 0
    row_steps: int = 0  # rows actually computed, summed over steps
    compactions: int = 0


def token_cap(duration_s: float, opts: DecodeOptions) -> int:
    """Most tokens a window of this duration may produce (none for an idle row)."""
    if duration_s <= 0:
        return 0
    return min(opts.max_new_tokens, int(opts.min_tokens + opts.tokens_per_s * duration_s))


@dataclass
class _Rows:
    """Per-live-row decoding state as tensors (one entry per live row)."""

    cap: Tensor  # token cap
    ts_limit: Tensor  # last allowed timestamp index (the window's length)
    last: Tensor  # last sampled token, -1 before any
    prev: Tensor  # the one before, -1 before any
    ts_max: Tensor  # largest timestamp index sampled, -1 before any
    locked: Tensor  # a digit written: digits only from here (DecodeOptions.digits_after_digit)
    lockable: Tensor  # rows the digit lock applies to
    any_lockable: bool = False

    def keep(self, idx: list[int]) -> None:
        for name in ("cap", "ts_limit", "last", "prev", "ts_max", "locked", "lockable"):
            setattr(self, name, getattr(self, name)[idx])


class GreedyDecoder:
    """Greedy timestamped decoding for one model/tokenizer pair; reusable across batches."""

    def __init__(self, model: Whisper, tokenizer: WhisperTokenizer, opts: DecodeOptions) -> None:
        self.model = model
        self.tok = tokenizer
        self.opts = opts
        sp = tokenizer.special
        if opts.language is not None:
            tokenizer.language_id(opts.language)  # validate early
        # no candidates configured: every language the model knows
        self.all_languages = list(sp.languages.values())
        self.candidates = [tokenizer.language_id(c) for c in opts.candidate_languages] or self.all_languages
        n_vocab = model.dims.n_vocab
        self.tb = sp.timestamp_begin
        suppress = torch.zeros(n_vocab, dtype=torch.bool)
        suppress[list(tokenizer.suppress_ids)] = True
        suppress[sp.eot + 1 : self.tb] = True  # every special token except the timestamps
        self.suppress = suppress
        begin = suppress.clone()
        begin[: self.tb] = True  # the first token is a timestamp ...
        begin[self.tb + round(opts.max_initial_timestamp_s / TIME_STEP_S) + 1 :] = True  # ... near the start
        self.suppress_begin = begin
        self.ts_index = torch.arange(n_vocab) - self.tb  # timestamp index of each id (negative: not one)
        self.lang_by_id = {v: k for k, v in sp.languages.items()}
        self.digit_ids, self.not_number = number_tokens(tokenizer, n_vocab) if opts.digits_after_digit else (
            torch.zeros(n_vocab, dtype=torch.bool), torch.zeros(sp.eot, dtype=torch.bool))

    def decode(self, memories: list[Tensor], cache: KVCache, durations_s: list[float],
               stats: DecodeStats, lock_rows: Sequence[bool] | None = None,
               temperatures: Sequence[float] | None = None,
               heard: Sequence[Heard | None] | None = None) -> list[WindowDecode]:
        """memories: encoder outputs (B_i, T_i, D) of consecutive row groups, each encoded at its
        own length; cache views sized for all B rows and the longest T; each row's audio duration
        (token cap, last timestamp) -> one result per row. ``lock_rows``: which rows the digit
        lock applies to (a decoder built with ``digits_after_digit``; default: every row), so a
        window's free and digit-locked decodes can share one batch's steps. ``temperatures``: each
        row's (default: the options'), so one window's fallback decodes share a batch's steps too.
        ``heard``: per row, the language an earlier decode of its whole window was made in; that row
        is decoded in it instead of one detected anew (None: detected)."""
        device = memories[0].device
        n = sum(m.shape[0] for m in memories)
        sp = self.tok.special
        masks = (self.suppress.to(device), self.suppress_begin.to(device), self.ts_index.to(device),
                 self.not_number.to(device))
        self.fill_cross(memories, cache)
        results = [WindowDecode() for _ in range(n)]
        first = [sp.sot_prev, *self.opts.prompt_tokens, sp.sot] if self.opts.prompt_tokens else [sp.sot]
        sot = torch.tensor([first] * n, dtype=torch.long, device=device)
        logits = self.model.decoder(sot, cache).float()
        stats.steps += 1
        stats.row_steps += n
        langs = self._languages(logits, results, heard)
        prompt = torch.tensor([[lang, sp.transcribe] for lang in langs], dtype=torch.long, device=device)
        logits = self.model.decoder(prompt, cache).float()
        none = torch.full((n,), -1, dtype=torch.long, device=device)
        state = _Rows(
            cap=torch.tensor([token_cap(d, self.opts) for d in durations_s], device=device),
            ts_limit=torch.tensor([int(d / TIME_STEP_S) for d in durations_s], device=device),
            last=none, prev=none.clone(), ts_max=none.clone(), locked=torch.zeros(n, dtype=torch.bool, device=device),
            lockable=torch.tensor([self.opts.digits_after_digit and (lock_rows is None or bool(lock_rows[i]))
                                   for i in range(n)], dtype=torch.bool, device=device))
        state.any_lockable = bool(state.lockable.any())
        digit_ids = self.digit_ids.to(device)
        rows = list(range(n))  # live position -> result index
        temps = torch.tensor(temperatures if temperatures is not None else [self.opts.temperature] * n, device=device)
        samplers = [torch.Generator(device).manual_seed(self.opts.seed) for _ in range(n)] \
            if bool((temps > 0).any()) else None
        step = 0
        while rows:
            stats.steps += 1
            stats.row_steps += len(rows)
            logprobs = self._apply_rules(logits, state, step, masks)
            nxt = logprobs.argmax(dim=-1) if samplers is None else \
                self._sample(logprobs, [samplers[r] for r in rows], temps[rows])
            capped = state.cap <= step
            nxt = torch.where(capped, torch.full_like(nxt, sp.eot), nxt)
            chosen = logprobs.gather(1, nxt[:, None])[:, 0]
            done = self._record(rows, nxt.tolist(), chosen.tolist(), capped.tolist(), results)
            state.prev, state.last = state.last, nxt
            is_ts = nxt >= self.tb
            state.ts_max = torch.where(is_ts, torch.maximum(state.ts_max, nxt - self.tb), state.ts_max)
            if state.any_lockable:
                state.locked = state.locked | (digit_ids[nxt] & state.lockable)
            step += 1
            if all(done):
                break
            n_done = sum(done)
            if n_done and n_done >= self.opts.compact_fraction * len(rows):
                keep = [i for i, d in enumerate(done) if not d]
                nxt = nxt[keep]
                state.keep(keep)
                rows = [rows[i] for i in keep]
                self._compact(cache, keep)
                stats.compactions += 1
            logits = self.model.decoder(nxt[:, None], cache).float()
        return results

    def _sample(self, logprobs: Tensor, samplers: list[torch.Generator], temps: Tensor) -> Tensor:
        """One token per row drawn at its temperature (0: the likeliest), each row from its own
        generator (the Gumbel-max trick: the argmax of log-probabilities plus Gumbel noise is a draw)."""
        uniform = torch.stack([torch.rand(logprobs.shape[1], generator=g, device=logprobs.device) for g in samplers])
        gumbel = -torch.log(-torch.log(uniform.clamp(1e-10, 1 - 1e-7)))
        hot = temps[:, None] > 0
        return torch.where(hot, logprobs / temps[:, None].clamp(min=1e-6) + gumbel, logprobs).argmax(dim=-1)

    def _apply_rules(self, logits: Tensor, s: _Rows, step: int, masks: tuple[Tensor, ...]) -> Tensor:
        """Suppression and timestamp rules on logits (B, vocab) -> log-probabilities (B, vocab)."""
        suppress, suppress_begin, ts_index, not_number = masks
        tb, eot = self.tb, self.tok.special.eot
        if step == 0:
            logits.masked_fill_(suppress_begin, NEG_INF)
            return torch.log_softmax(logits, dim=-1)
        logits.masked_fill_(suppress, NEG_INF)
        if s.any_lockable:
            logits[:, :eot].masked_fill_(s.locked[:, None] & not_number[None, :], NEG_INF)
        last_ts = s.last >= tb
        pair_done = last_ts & ((step < 2) | (s.prev >= tb))  # a closed pair: text must follow
        logits[:, tb:].masked_fill_(pair_done[:, None], NEG_INF)
        logits[:, :eot].masked_fill_((last_ts & ~pair_done)[:, None], NEG_INF)  # a lone closing: no text
        # never backwards (a closing timestamp may repeat its opening), never past the audio
        floor = torch.where(last_ts & ~pair_done, s.ts_max, s.ts_max + 1)
        is_ts = ts_index[None, :] >= 0
        bad_ts = is_ts & ((ts_index[None, :] < floor[:, None]) | (ts_index[None, :] > s.ts_limit[:, None]))
        logits.masked_fill_(bad_ts, NEG_INF)
        logprobs = torch.log_softmax(logits, dim=-1)
        # a timestamp when the timestamps together outweigh every single text token
        ts_mass = torch.logsumexp(logprobs[:, tb:], dim=-1)
        best_text = logprobs[:, :tb].max(dim=-1).values
        force = ts_mass > best_text
        if bool(force.any()):
            logprobs[:, :tb].masked_fill_(force[:, None], NEG_INF)
        return logprobs

    def _languages(self, logits: Tensor, results: list[WindowDecode],
                   heard: Sequence[Heard | None] | None = None) -> list[int]:
        """Pick each row's language token from the logits after <|startoftranscript|>: the likeliest
        candidate, unless the candidates together are unlikely (another language: the likeliest of all).
        A row given what its window was heard as keeps it: a few seconds cut from a window are too
        little to tell the language by (a 3.8 s piece of an English GSM call read as Thai, which it
        then looped in, and the turn was lost)."""
        sp = self.tok.special
        probs = torch.softmax(logits, dim=-1)
        no_speech = probs[:, sp.no_speech].tolist()
        n = len(results)
        foreign = [False] * n
        if self.opts.language is not None:
            lang_ids, lang_probs = [self.tok.language_id(self.opts.language)] * n, [1.0] * n
        else:
            every = torch.tensor(self.all_languages, device=logits.device)
            share = torch.softmax(logits[:, every], dim=-1)  # (n, languages)
            is_cand = torch.isin(every, torch.tensor(self.candidates, device=logits.device))
            cand_share = share[:, is_cand]
            best_cand = every[is_cand][cand_share.argmax(dim=-1)]
            cand_prob = cand_share.max(dim=-1).values / cand_share.sum(dim=-1)  # among the candidates
            top_prob, top = share.max(dim=-1)
            foreign = (cand_share.sum(dim=-1) < self.opts.foreign_below).tolist()
            lang_ids = torch.where(torch.tensor(foreign, device=logits.device), every[top], best_cand).tolist()
            lang_probs = [t if f else c for f, t, c in zip(foreign, top_prob.tolist(), cand_prob.tolist())]
        for i, given in enumerate(heard or ()):
            if given is not None:
                lang_ids[i], lang_probs[i], foreign[i] = self.tok.language_id(given.language), given.prob, given.foreign
        for r, lang, p, ns, f in zip(results, lang_ids, lang_probs, no_speech, foreign):
            r.language, r.language_prob, r.no_speech_prob, r.foreign = self.lang_by_id[lang], p, ns, f
        return lang_ids

    def _record(self, rows: list[int], nxt: list[int], chosen: list[float], capped: list[bool],
                results: list[WindowDecode]) -> list[bool]:
        eot = self.tok.special.eot
        done = []
        for pos, idx in enumerate(rows):
            result = results[idx]
            if result.finished:  # still in the batch until the next compaction
                done.append(True)
                continue
            if nxt[pos] == eot:
                result.finished, result.complete = True, not capped[pos]
                done.append(True)
                continue
            result.sum_logprob += chosen[pos]
            result.tokens.append(nxt[pos])
            if self._stuck(result.tokens):
                result.finished = True
            done.append(result.finished)
        return done

    def _stuck(self, tokens: list[int]) -> bool:
        opts = self.opts
        return ends_in_loop(tokens, opts.loop_period, opts.loop_copies) or ends_in_loop(
            tokens, opts.phrase_period, opts.phrase_copies, min_period=opts.loop_period + 1)

    def fill_cross(self, memories: list[Tensor], cache: KVCache) -> None:
        """Cross keys/values of each row group; where groups differ in length, the shorter rows'
        tail is zeroed and masked out, so a row attends to exactly what it attends to alone."""
        full = cache.cross_kv.shape[4]
        lengths, row = [], 0
        for memory in memories:
            b, t = memory.shape[0], memory.shape[1]
            target = cache.cross_kv[:, :, row : row + b]
            self.model.decoder.fill_cross_kv(memory, target[:, :, :, :, :t])
            if t < full:
                target[:, :, :, :, t:].zero_()
            lengths += [t] * b
            row += b
        cache.cross_mask = None
        if min(lengths) < full:
            positions = torch.arange(full, device=cache.cross_kv.device)
            limit = torch.tensor(lengths, device=positions.device)
            cache.cross_mask = (positions[None, :] < limit[:, None])[:, None, None, :]

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
        if cache.cross_mask is not None:
            cache.cross_mask = cache.cross_mask.index_select(0, idx)


@functools.cache
def number_tokens(tokenizer: WhisperTokenizer, n_vocab: int) -> tuple[Tensor, Tensor]:
    """Masks of the text tokens that write digits (n_vocab) and of those that write anything but
    digits and separators (the text ids, below end-of-text); built once per tokenizer."""
    eot = tokenizer.special.eot
    digits = torch.zeros(n_vocab, dtype=torch.bool)
    other = torch.ones(eot, dtype=torch.bool)
    for i in range(eot):
        text = tokenizer.decode([i])
        if text and all(ch in _NUMBER_CHARS for ch in text):
            other[i] = False
            digits[i] = any(ch.isdigit() for ch in text)
    return digits, other


def ends_in_loop(tokens: list[int], max_period: int, copies: int, min_period: int = 1) -> bool:
    """Whether ``tokens`` end in one run of ``min_period`` to ``max_period`` tokens said ``copies`` times."""
    for period in range(min_period, max_period + 1):
        span = period * copies
        if len(tokens) < span:
            break
        if copies > 1 and tokens[-1] != tokens[-1 - period]:  # most tokens: no such run ends here
            continue
        tail = tokens[-span:]
        if tail == tail[:period] * copies:
            return True
    return False
