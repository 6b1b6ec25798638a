"""The behaviour kind's tasks and their items (no torch; qclm's public plug-in API only).

Every task item is asked as a forced choice between two options scored from their log-probabilities (base models
answer as chat models do: nothing is generated or parsed), and read as P(target), the probability of its target
option against the other:

- ``bandit``: a two-armed bandit in the prompt form of Binz & Schulz (2023) (machines F and J, "Machine F
  delivered 2.3 dollars"), the task Coda-Forno et al. (2023) asked under anxiety-inducing prompts: a seeded history
  of the two machines' rewards (:func:`qclm_behaviour.fits.bandit_histories`, whose docstring says where its
  parameters come from), then "Q: Which machine do you choose? A: Machine" with the options " F" and " J". The
  target is the machine with the higher posterior mean after the history (exploitation); the item's regressors
  (V, RU, TU, after Gershman 2018) are the target's less the other's, which the probit fit reads
  (:func:`qclm_behaviour.fits.fit_probit`). Asked in both orders: each machine is called F once and J once.
- ``interpretation``: an ambiguous everyday scenario written for qclm (``data/interpretation.yaml``), continued by
  a threatening and a benign reading matched in length and word frequency (:mod:`qclm_behaviour.matching`); the
  target is the threatening reading. The readings are scored as continuations of the scenario, so there is no
  label and no order to balance: the matching is what makes the two comparable.
- ``risk``: a seeded choice between a sure amount and a gamble (:func:`qclm_behaviour.fits.risk_choices`; equal
  and unequal expected values), "Option 1" and "Option 2" with the options " 1" and " 2"; the target is the sure
  amount, the item's stakes are what the risk-aversion fit reads (:func:`qclm_behaviour.fits.fit_crra`). Asked in
  both orders: the sure amount is Option 1 once and Option 2 once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from qclm.plugin import InputError, document_problems, read_yaml

#: the kind's category in the report
CATEGORY = "Behaviour and predictive validity"
#: the tasks, in the order the tables list them
TASKS = ("bandit", "interpretation", "risk")
#: what each task's readout P(target) is the probability of
TARGETS = {"bandit": "the machine with the higher posterior mean (exploitation)",
           "interpretation": "the threatening reading", "risk": "the sure amount"}
#: the items a procedurally generated task has unless the config says otherwise (the issue's floor: 40)
DEFAULT_ITEMS = 40
#: the shipped scenarios of the interpretation task
SCENARIOS = Path(__file__).parent / "data" / "interpretation.yaml"
#: the options' labels of the tasks asked with labels, in the order the prompt lists them
LABELS = {"bandit": ("F", "J"), "risk": ("1", "2")}
#: the features of an item that the fits read (a task's own; NaN elsewhere in the tables)
FEATURES = ("v", "ru", "tu", "sure", "prob", "amount")

BANDIT_PROMPT = ("You are going to a casino that owns two slot machines.\n"
                 "You earn money each time you play on one of these machines.\n\n"
                 "You have received the following amount of dollars when playing in the past:\n"
                 "{history}\n\n"
                 "Your goal is to maximize the sum of received dollars within {left} additional rounds.\n\n"
                 "Q: Which machine do you choose?\n"
                 "A: Machine")
BANDIT_PLAY = "- Machine {label} delivered {reward} dollars."
INTERPRETATION_PROMPT = "{scenario}\nWhat is going on:"
RISK_PROMPT = ("You are offered a choice between two options.\n"
               "Option {first_label}: {first}\n"
               "Option {second_label}: {second}\n\n"
               "Q: Which option do you choose?\n"
               "A: Option")
RISK_SURE = "Receive ${amount} for sure."
RISK_GAMBLE = "{article} {percent}% chance of receiving ${amount}, otherwise nothing."


@dataclass(frozen=True)
class TaskItem:
    """One item of a task: its prompt in each order of its options (one prompt where the options are
    continuations), the options' texts as scored in each order, which of them is the target in each order, and
    the features the fits read."""

    task: str
    item_id: str
    prompts: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    targets: tuple[int, ...]
    features: Mapping[str, float] = field(default_factory=dict)
    domain: str = ""

    @property
    def orders(self) -> int:
        return len(self.prompts)


SCENARIO_SCHEMA = {
    "type": "object", "required": ["name", "licence", "items"],
    "properties": {
        "name": {"type": "string", "minLength": 1}, "description": {"type": "string"},
        "licence": {"type": "string", "minLength": 1},
        "items": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["id", "domain", "scenario", "threatening", "benign"],
            "properties": {k: {"type": "string", "minLength": 1}
                           for k in ("id", "domain", "scenario", "threatening", "benign")},
            "additionalProperties": False}},
    },
    "additionalProperties": False,
}


@cache
def load_scenarios(path: str) -> tuple[dict, ...]:
    """The interpretation task's scenarios: the file's items, checked against the schema, every string as qclm
    checks user text, and each pair of readings matched (:func:`qclm_behaviour.matching.problems`); every problem
    one line ``FILE: LOCATION: PROBLEM`` (:class:`qclm.plugin.InputError`)."""
    from qclm_behaviour.matching import problems

    data = read_yaml(path)
    found = document_problems(data, SCENARIO_SCHEMA, path, {"items": "item"})
    if not found:
        found = problems(data["items"], path)
    if found:
        raise InputError(found)
    return tuple(data["items"])


def interpretation_items(path: str, n: int | None) -> list[TaskItem]:
    """The first ``n`` scenarios (None: all) as items: the scenario as the context, its two readings as the
    options (threatening first: the target)."""
    return [TaskItem("interpretation", str(s["id"]), (INTERPRETATION_PROMPT.format(scenario=s["scenario"]),),
                     ((s["threatening"], s["benign"]),), (0,), {}, str(s["domain"]))
            for s in load_scenarios(str(path))[:n]]


def _amount(value: float) -> str:
    """A reward as the prompt shows it (one decimal, as the generator rounds it)."""
    return f"{value:.1f}"


def bandit_items(n: int, seed: int) -> list[TaskItem]:
    """``n`` bandit items of a seed (:func:`qclm_behaviour.fits.bandit_histories`): the history as the prompt
    lists it, with machine 1 called F and machine 2 J (order 0) and the other way round (order 1); the target the
    machine with the higher posterior mean, its regressors (V, RU, TU) the target's less the other's."""
    from qclm_behaviour.fits import TRIALS, bandit_histories, regressors

    items = []
    for game in bandit_histories(n, seed):
        reg = regressors(game)
        target = 0 if reg["V"] >= 0 else 1
        sign = 1.0 if target == 0 else -1.0
        prompts, targets = [], []
        for order in (0, 1):
            letters = LABELS["bandit"] if order == 0 else LABELS["bandit"][::-1]  # machine 1's, machine 2's
            history = "\n".join(BANDIT_PLAY.format(label=letters[m], reward=_amount(r)) for m, r in game["history"])
            prompts.append(BANDIT_PROMPT.format(history=history, left=TRIALS - len(game["history"])))
            targets.append(LABELS["bandit"].index(letters[target]))
        items.append(TaskItem("bandit", f"bandit{game['item'] + 1:03d}", tuple(prompts),
                              (LABELS["bandit"],) * 2, tuple(targets),
                              {"v": sign * reg["V"], "ru": sign * reg["RU"], "tu": reg["TU"]}))
    return items


def _article(number: int) -> str:
    """"A" or "An" before a number said aloud ("an 80% chance", "an 11% chance", "a 75% chance")."""
    text = str(number)
    return "An" if text.startswith("8") or (len(text) in (2, 5) and text.startswith(("11", "18"))) else "A"


def risk_items(n: int, seed: int) -> list[TaskItem]:
    """``n`` risk items of a seed (:func:`qclm_behaviour.fits.risk_choices`): the sure amount as Option 1 and the
    gamble as Option 2 (order 0), and the other way round (order 1); the target the sure amount."""
    from qclm_behaviour.fits import risk_choices

    items = []
    for choice in risk_choices(n, seed):
        sure = RISK_SURE.format(amount=choice["sure"])
        percent = round(100 * choice["q"])
        gamble = RISK_GAMBLE.format(article=_article(percent), percent=percent, amount=choice["x"])
        prompts = tuple(RISK_PROMPT.format(first_label=LABELS["risk"][0], second_label=LABELS["risk"][1],
                                           first=first, second=second)
                        for first, second in ((sure, gamble), (gamble, sure)))
        items.append(TaskItem("risk", f"risk{choice['item'] + 1:03d}", prompts, (LABELS["risk"],) * 2, (0, 1),
                              {"sure": float(choice["sure"]), "prob": float(choice["q"]),
                               "amount": float(choice["x"])}))
    return items


def generated(task: str, n: int, seed: int) -> list[TaskItem]:
    """The ``n`` items of a procedurally generated task of a seed."""
    return {"bandit": bandit_items, "risk": risk_items}[task](n, seed)
