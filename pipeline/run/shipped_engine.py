"""The shipped engine, loaded: :func:`pipeline.asr.presets.shipped` with what the rule packs give it.

One loader for ``callqa run``, ``callqa worker`` and the tools that measure what those run
(tools/eval_qa.py, tools/bench_system.py, ...), so a tool does not import the command line or
copy its options.
"""

from __future__ import annotations

from typing import Any

from pipeline.config import Settings


def load_engine(
    cfg: Settings,
    device: str = "auto",
    *,
    initial_prompt: str | None = None,
    hotwords: bool = True,
    number_languages: tuple[str, ...] | None = None,
) -> Any:
    """The shipped engine on ``device``. The rule packs' hotwords (if any, and ``hotwords``) become
    the decoder's initial prompt unless ``initial_prompt`` is given; their disclosure phrases name
    the agent on mono calls (speaker separation). Number regions are decoded again, digit-biased, in
    ``number_languages`` (default: the settings' ``asr_number_languages``)."""
    from pipeline.asr import Engine
    from pipeline.asr.presets import shipped
    from pipeline.qa.rules import agent_phrases, hotword_prompt, load_packs

    packs = load_packs(list(cfg.qa_rule_packs))
    # a forced language takes only its own terms (a mixed prompt pulls windows towards the other language)
    prompt = initial_prompt or (hotword_prompt(packs, cfg.asr_language) if hotwords else None)
    options = shipped(
        cfg, device, initial_prompt=prompt, agent_phrases=agent_phrases(packs), number_languages=number_languages
    )
    return Engine.load(options)
