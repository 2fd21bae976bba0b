"""The engine benchmark's sentence material, split into a development and a check part.

Each part has its own English templates, its own pools of names, streets, towns and months to
fill them with, its own espeak-ng voices and its own Mandarin clips; nothing here is shared
between the parts (tests/unit/test_bench_corpus.py checks that). Slots: {name}, {street},
{town}, {month}, {day}, {digits} (a digit string spoken digit by digit), {amount}, {time},
{count}. Numbers are drawn per call, so no two calls say the same ones.

Mandarin: the only Mandarin speech that reaches Whisper intelligibly here is the 25 neural-voice
clips in tests/fixtures/zh (one speaker; /work/shared/fixtures/zh holds the same clips), so the
parts split those 25 and vary them by rate and pitch; the sentences repeat within a part.

Data only; imports nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Material:
    """What one part's calls are made of."""

    name: str
    agent_en: tuple[str, ...]
    customer_en: tuple[str, ...]
    names: tuple[str, ...]
    streets: tuple[str, ...]
    towns: tuple[str, ...]
    months: tuple[str, ...]
    voices: tuple[str, ...]  # espeak-ng voice+variant
    zh_clips: tuple[int, ...]  # indices into tests/fixtures/zh/manifest.json's clips
    seed_salt: int  # mixed into every seed, so dev seed S and check seed S draw different calls


DEV = Material(
    name="dev",
    agent_en=(
        "Thank you for calling, my name is {name}, how can I help you today?",
        "Could you confirm the first line of your address for me?",
        "I can see a payment of {amount} taken on the {day} of {month}.",
        "Let me read that back, the reference is {digits}, is that right?",
        "The engineer can come on the {day} of {month} at {time}.",
        "Your balance today is {amount} and the next bill is due in {count} days.",
        "I have sent a new card to {street}, {town}, it should arrive in {count} working days.",
        "This call may be recorded for training and quality purposes.",
        "Is there anything else I can help you with today, {name}?",
        "I will pass this to my colleague {name} who looks after refunds.",
    ),
    customer_en=(
        "Hi, I am calling about my bill, it says {amount} and that looks too high.",
        "Sure, it is {count} {street}, {town}.",
        "My account number is {digits}.",
        "I was charged twice on the {day} of {month}.",
        "The parcel never arrived, I waited in all day until {time}.",
        "Yes, my name is {name} and I moved here in {month}.",
        "Can you tell me why my card was declined for {amount}?",
        "No, that is everything, thank you very much for your help.",
        "I would like to cancel the contract at the end of {month}.",
        "The phone number on the account is {digits}.",
    ),
    names=(
        "Sarah Collins",
        "David Okafor",
        "Priya Shah",
        "Tom Becker",
        "Maria Lopez",
        "James Wright",
        "Anna Kowalski",
        "Ben Taylor",
    ),
    streets=("Mill Lane", "Church Road", "Station Street", "Park Avenue", "Oak Close", "High Street"),
    towns=("Leeds", "Bristol", "Norwich", "Cardiff", "Durham"),
    months=("January", "March", "May", "July", "September", "November"),
    voices=("en-us", "en-us+m3", "en-gb+f2", "en-us+f3", "en-gb-x-rp+m5"),
    zh_clips=(0, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23),
    seed_salt=0x5EED_0001,
)

CHECK = Material(
    name="check",
    agent_en=(
        "Good morning, you are through to customer care, I am {name}.",
        "Before we go on I need to check your date of birth and postcode.",
        "The transfer of {amount} left your account on the {day} of {month}.",
        "I have noted the card ending {digits}, I will block it now.",
        "A courier will collect the box from {street} between {time} and six.",
        "Your plan costs {amount} a month for the next {count} months.",
        "I am opening a complaint for you, it will be answered within {count} days.",
        "Please note that this conversation is being recorded.",
        "Thanks for waiting, {name}, I have the answer now.",
        "You will get a text message from us on {digits} to confirm.",
    ),
    customer_en=(
        "Hello, I want to know what happened to the money I sent on the {day} of {month}.",
        "I live at {count} {street} in {town}.",
        "The card number starts with {digits}.",
        "Somebody took {amount} out of my account last night.",
        "I am free after {time} on weekdays.",
        "It is {name}, I opened the account in {month}.",
        "Why has my monthly price gone up to {amount}?",
        "Great, that sorts it out, goodbye.",
        "I am moving to {town} next {month}, can I keep the same number?",
        "You can call me back on {digits} any time.",
    ),
    names=(
        "Helen Murphy",
        "Rajesh Iyer",
        "Chloe Martin",
        "Lukas Novak",
        "Fatima Bello",
        "Oliver Grant",
        "Sofia Rossi",
        "Kevin Walsh",
    ),
    streets=("Elm Grove", "Victoria Terrace", "Queens Drive", "Canal Walk", "Hill Crescent", "Bridge Street"),
    towns=("Glasgow", "Exeter", "York", "Belfast", "Brighton"),
    months=("February", "April", "June", "August", "October", "December"),
    voices=("en-gb", "en-us+m5", "en-gb-scotland+f4", "en-us+f2", "en-gb+m2"),
    zh_clips=(2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24),
    seed_salt=0x5EED_0002,
)

PARTS = {"dev": DEV, "check": CHECK}
