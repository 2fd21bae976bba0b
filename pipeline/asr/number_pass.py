"""The second decode of number regions, with a prompt of digits read one by one.

After the first pass, :func:`pipeline.asr.numbers.plan_number_regions` finds where a long
number seems to be said. Each region's audio is decoded again as a window of its own,
with the language forced to the first pass's and a prompt that reads numbers digit by
digit ("the card is 4, 5, 3, 2, …"): Whisper then tends to write one numeral per spoken
digit instead of merging, dropping or hearing digits as words. On 16 espeak 8 kHz
readings of cards, resident IDs and mobiles (tools/eval_qa's customer voice) the digit
strings matched the spoken ones exactly 1/16 times without a prompt and 8/16 with this
one. A logit bias toward digit tokens on top only added repetition loops; a penalty on
words once a digit was written (5 nats) read one more of 49 numbers exactly, but read two
amounts as card numbers.

A digit-prompted decode that loops ("3, 1, 0, 1, 0, 4, 1, 9, 8, 6, 6, 6, 6, …") stops at
the loop's sixth copy (a sentence said again word for word, at its second:
:data:`pipeline.asr.decode.PHRASE_PERIOD_TOKENS`) and is done again at rising temperatures, the way Whisper falls back,
and the coolest that reads as a number without a loop is taken; the rest of the number is often
there ("… 9, 8, 6, 7, 8, 0, 9, 2, 3, 0, 3"). The temperatures are rows of one batch, not decodes
in turn: a CPU decode step costs little more for four rows than for one.

A region that still reads as no card, ID or phone number although one was announced and begun
("My mobile number is 1 time, 0, 8, 6, …") is decoded once more with digits only after the
first digit: where the model would write a word it must say which digit it hears, and once the
number is over it ends the window, the rest decoded freely as above. Regions that say an amount
are left out: forced to digits, "two hundred and forty dollars" came out "200,000,000, 40,000".

The new text replaces the region's first-pass segments only when it reads as a longer
number than the first pass's and one the region's audio could hold (7 digits a second at
most), and a decode that still loops is cut or dropped (:func:`pipeline.asr.numbers.accepted_text`).
A first-pass number said faster than that (the model copying an earlier number into a
sentence) gives way to the second decode's text. Only the digits change: the first pass's
words before and after its number stay (:func:`pipeline.asr.numbers.splice_number`), and a
region whose first pass holds no digit (a request for a number) or a number that passes its
checksum is not decoded again (:func:`pipeline.asr.numbers.worth_decoding`). Regions are batched
like first-pass windows (the engine's planner, encoder and memory pool).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from pipeline.asr.decode import (
    LOOP_PERIOD_TOKENS,
    PHRASE_PERIOD_TOKENS,
    PROMPT_TOKENS,
    TIME_STEP_S,
    DecodeOptions,
    DecodeStats,
    GreedyDecoder,
)
from pipeline.asr.numbers import (
    NumberRegion,
    accepted_text,
    around_number,
    cut_loop,
    extend_to_speech,
    invented_rest,
    loops_on_digits,
    merge_number_texts,
    plan_number_regions,
    reads_as_number,
    repeats_itself,
    splice_number,
    worth_decoding,
    worth_digits_only,
)
from pipeline.asr.packing import RATE, PackedWindow, Piece
from pipeline.asr.timing import timed_spans
from pipeline.asr.transcript import CallTranscript
from pipeline.asr.windows import WindowRunner
from pipeline.numbers.spoken import longest_digit_run, names_amount

# Numbers read the way callers read them, in words other than any rule's cues.
DIGIT_PROMPTS = {
    "en": "Sure, the card is 4, 5, 3, 2, 0, 1, 7, 8, 9, 6. The ID is 1, 1, 0, 1, 0, 5, 1, 9, 8, 0. "
    "And the phone is 1, 3, 9, 0, 0, 2, 1, 4, 5, 6, 7.",
    "zh": "好的，卡是4, 5, 3, 2, 0, 1, 7, 8, 9, 6。证件是1, 1, 0, 1, 0, 5, 1, 9, 8, 0。电话是1, 3, 9, 0, 0, 2, 1, 4, 5, 6, 7。",
}
MIN_NEW_TOKENS = 64
MIN_RESUME_S = 1.0  # audio left after the model's last timestamp that is decoded once more
MAX_ROUNDS = 2
# A decode stuck in a loop is done again at these temperatures, the coolest that reads as a
# number taken (Whisper's own fallback schedule, less its last step). On tools/eval_qa seeds 1-7 the
# English calls with a spoken number had their PII found 63/66 times, 60/66 without this.
FALLBACK_TEMPERATURES = (0.2, 0.4, 0.6, 0.8)


class FirstPassWindow(Protocol):
    """What the number pass reads of a first-pass window."""

    call: int
    channel: int
    packed: PackedWindow
    stream: np.ndarray


@dataclass(frozen=True, eq=False)
class _RegionWindow:
    """A region as an item of the engine's batch planner and encoder."""

    call: int
    channel: int
    packed: PackedWindow
    stream: np.ndarray = field(repr=False)
    first_pass: str = ""  # the first pass's text of the region
    locked: bool = False  # decoded with digits only after the first digit
    temperature: float = 0.0  # a fallback decode's

    @property
    def duration_s(self) -> float:
        return self.packed.duration_s


class NumberPass:
    """Digit-prompted decoders, one per language, sharing the engine's model and memory pool."""

    def __init__(self, engine: WindowRunner, languages: Sequence[str], compact_fraction: float) -> None:
        self.engine = engine
        self.compact_fraction = compact_fraction  # the engine's: when a batch drops its finished rows
        self.languages = tuple(languages)
        self.decoders: dict[str, GreedyDecoder] = {}  # built on first use
        self.prompts: dict[str, tuple[int, ...]] = {}
        self.regions = 0
        self.left = 0  # regions not decoded again: no digit in them, or a number that passes its check
        self.replaced = 0
        self.fallbacks = 0  # region decodes done again at a temperature
        self.locked = 0  # region decodes done again with digits only after the first
        self.invented = 0  # rests of region decodes dropped: the digit prompt, not the audio
        self.seconds = 0.0
        self._memories: dict[tuple, torch.Tensor] = {}  # encoder outputs of this run's regions
        for lang in languages:
            if lang not in DIGIT_PROMPTS:
                raise ValueError(f"no digit prompt for language {lang!r} (have {sorted(DIGIT_PROMPTS)})")
            prompt = tuple(engine.tokenizer.encode(" " + DIGIT_PROMPTS[lang]))
            # the pool's token rows were sized for the engine's own prompt: fit the new text in
            room = engine.pool.max_tokens - (len(prompt) + 2) - PROMPT_TOKENS
            if room < MIN_NEW_TOKENS:
                raise ValueError(f"the memory pool leaves {room} tokens for a number decode in {lang!r}")
            self.prompts[lang] = prompt

    def _decoder(self, lang: str) -> GreedyDecoder:
        """The digit-prompted decoder of a language (built when first asked for); the digit lock and
        the temperature are chosen per row (``_RegionWindow.locked``, ``.temperature``)."""
        if lang not in self.decoders:
            engine, prompt = self.engine, self.prompts[lang]
            self.decoders[lang] = GreedyDecoder(
                engine.model,
                engine.tokenizer,
                DecodeOptions(
                    language=lang,
                    candidate_languages=(lang,),
                    max_new_tokens=engine.pool.max_tokens - (len(prompt) + 2) - PROMPT_TOKENS,
                    compact_fraction=self.compact_fraction,
                    prompt_tokens=prompt,
                    loop_period=LOOP_PERIOD_TOKENS,
                    phrase_period=PHRASE_PERIOD_TOKENS,
                    digits_after_digit=True,
                ),
            )
        return self.decoders[lang]

    def run(self, transcripts: list[CallTranscript], windows: Sequence[FirstPassWindow]) -> list[CallTranscript]:
        """Each call's transcript with its number regions decoded again where that reads better;
        ``windows`` are the first pass's (their channel audio at 16 kHz and speech pieces)."""
        started = time.perf_counter()
        streams = {(w.call, w.channel): w.stream for w in windows}
        speech: dict[tuple[int, int], list[tuple[float, float]]] = {}
        for w in windows:
            speech.setdefault((w.call, w.channel), []).extend(
                (p.src_start / RATE, p.src_end / RATE) for p in w.packed.pieces
            )
        plans = [plan_number_regions(t.segments, t.duration_s, self.languages) for t in transcripts]
        todo: dict[str, list[tuple[_RegionWindow, NumberRegion]]] = {}
        for i, regions in enumerate(plans):
            for region in regions:
                stream = streams.get((i, region.channel))
                if stream is None:
                    continue
                region = extend_to_speech(around_number(region, transcripts[i].segments), speech[(i, region.channel)])
                lo, hi = int(region.start_s * RATE), min(int(region.end_s * RATE), len(stream))
                if hi - lo < RATE // 2:
                    continue
                old = " ".join(transcripts[i].segments[k].text for k in region.segments)
                if not worth_decoding(old):
                    self.left += 1
                    continue
                window = _RegionWindow(i, region.channel, PackedWindow((Piece(lo, hi, 0, hi - lo),)), stream, old)
                todo.setdefault(region.language, []).append((window, region))
        texts: dict[int, list[tuple[NumberRegion, str]]] = {}
        for lang, items in todo.items():
            decoded = self._decode_with_fallback(lang, [w for w, _ in items])
            for window, region in items:
                self.regions += 1
                new = accepted_text(decoded[id(window)], window.first_pass, window.duration_s)
                if new is not None and not repeats_itself(new, window.first_pass):
                    self.replaced += 1
                    texts.setdefault(window.call, []).append((region, splice_number(window.first_pass, new)))
        self._memories.clear()
        self.seconds += time.perf_counter() - started
        return [
            dataclasses.replace(t, segments=merge_number_texts(t.segments, texts[i])) if i in texts else t
            for i, t in enumerate(transcripts)
        ]

    def _decode_with_fallback(self, lang: str, windows: list[_RegionWindow]) -> dict[int, str]:
        """Text of each window (by id): greedy, or for a window whose greedy decode looped while
        writing digits the first of the fallback temperatures' texts that reads as a number (none:
        the greedy's). A loop with no digit ("我想查询一下我上个月的话费账单。" over and over) keeps
        the greedy's text: on the engine benchmark's Mandarin calls (seed 79) the four temperatures
        spent 17 s on one such region, and none read a number.
        A window whose text still reads as no card, ID or phone number although one was announced
        and begun (:func:`pipeline.asr.numbers.worth_digits_only`) takes its decode with digits only
        after its first digit (and its fallbacks), kept where that reads as a number at least as long
        and not as an amount. That locked decode runs beside the free one, in the same batch, for
        every window whose first pass names no amount (the only ones it can be wanted for): a CPU
        decode step costs about the same for 6 rows as for 12, so this halves the steps."""
        locked = {id(w): dataclasses.replace(w, locked=True) for w in windows if not names_amount(w.first_pass)}
        both = self._decode_texts(lang, [*windows, *locked.values()])
        decoded = {id(w): both[id(w)] for w in windows}
        self._fall_back(lang, [w for w in windows if loops_on_digits(decoded[id(w)])], decoded)
        unread = [w for w in windows if worth_digits_only(decoded[id(w)], w.first_pass)]
        if unread:
            self.locked += len(unread)
            again = {id(w): both[id(locked[id(w)])] for w in unread}  # unread name no amount: all decoded
            looped = [locked[id(w)] for w in unread if loops_on_digits(again[id(w)])]
            retried = {id(w): both[id(w)] for w in looped}
            self._fall_back(lang, looped, retried)
            again.update((k, retried[id(locked[k])]) for k in again if id(locked[k]) in retried)
            decoded.update(
                (k, v)
                for k, v in again.items()
                if reads_as_number(v) and not names_amount(v) and longest_digit_run(v) >= longest_digit_run(decoded[k])
            )
        return decoded

    def _fall_back(self, lang: str, looped: list[_RegionWindow], decoded: dict[int, str]) -> None:
        """Decode the ``looped`` windows again at every fallback temperature (one batch), updating
        ``decoded`` with each one's coolest text that reads as a number."""
        if not looped:
            return
        rows = [(w, dataclasses.replace(w, temperature=t)) for t in FALLBACK_TEMPERATURES for w in looped]
        self.fallbacks += len(rows)
        again = self._decode_texts(lang, [row for _, row in rows])
        for w, row in reversed(rows):  # the coolest last, so it wins
            if reads_as_number(again[id(row)]):
                decoded[id(w)] = again[id(row)]

    def _decode_texts(self, lang: str, windows: list[_RegionWindow]) -> dict[int, str]:
        """Text of each window (by id). Where the model ended early, more than ``MIN_RESUME_S``
        before the audio did, the rest is decoded once more and its text appended (as the first
        pass resumes a window): a number read slowly otherwise loses its last groups. A rest that loops
        or holds more digits than its audio could is dropped (:func:`pipeline.asr.numbers.invented_rest`)."""
        tb = self.engine.tokenizer.special.timestamp_begin
        parts: dict[int, list[str]] = {id(w): [] for w in windows}
        todo = [(w, id(w)) for w in windows]
        for round_ in range(MAX_ROUNDS):
            results = self._decode(self._decoder(lang), [w for w, _ in todo])
            later = []
            for w, origin in todo:
                tokens = results[id(w)]
                text = self.engine.text_of(tokens, lang)
                if round_ and invented_rest(text, w.duration_s):
                    self.invented += 1
                    continue
                parts[origin].append(text)
                spans = timed_spans(tokens, tb, TIME_STEP_S, w.duration_s)
                done_s = spans[-1].end_s if spans else w.duration_s
                if w.duration_s - done_s > MIN_RESUME_S and cut_loop(text) == text:
                    rest = w.packed.after(done_s)
                    if rest is not None:
                        later.append((dataclasses.replace(w, packed=rest, first_pass=""), origin))
            if not later:
                break
            todo = later
        return {k: " ".join(p for p in v if p) for k, v in parts.items()}

    @torch.inference_mode()
    def _decode(self, decoder: GreedyDecoder, windows: list[_RegionWindow]) -> dict[int, list[int]]:
        """Token ids of each window (by id), batched by the engine's planner at its buckets."""
        engine = self.engine
        out: dict[int, list[int]] = {}
        for batch in engine.plan_windows(windows):
            memories = [self._encoded(bucket_s, [batch.items[i] for i in rows]) for bucket_s, rows in batch.groups()]
            results = decoder.decode(
                memories,
                engine.pool.kv_cache(batch.padded_s, len(batch.items)),
                [item.duration_s for item in batch.items],
                DecodeStats(),
                [item.locked for item in batch.items],
                [item.temperature for item in batch.items],
            )
            for item, result in zip(batch.items, results, strict=True):
                out[id(item)] = result.tokens
        return out

    def _encoded(self, bucket_s: float, windows: list[_RegionWindow]) -> torch.Tensor:
        """Encoder output of windows at a bucket (n, T, D). A region decoded again (at a temperature,
        with digits locked) is encoded once: its audio and bucket are the same each time."""

        def key(w: _RegionWindow) -> tuple:  # by what is encoded, not by object (ids are reused)
            return w.call, w.channel, w.packed.pieces, bucket_s

        todo = list(
            {key(w): w for w in windows if key(w) not in self._memories}.values()
        )  # a free and a locked row: once
        if todo:
            encoded = self.engine.encode_windows(bucket_s, todo)
            self._memories.update((key(w), encoded[i : i + 1]) for i, w in enumerate(todo))
        return torch.cat([self._memories[key(w)] for w in windows])
