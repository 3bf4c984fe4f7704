"""The search `gpuwise plan` runs: the configurations of `search.configurations`, answered as the
exhaustive `search.candidates` answers them (tests/test_plan_equivalence.py compares the two), in
less time:

- every workload and deployment is made once per request (`search.Shapes`);
- `check_valid`, the memory estimate and the speed estimate run once per distinct (workload,
  deployment): two replica counts often give each engine the same number of users;
- speed and cost run only for configurations that fit;
- ranked by the hourly price, the configurations of a card are visited by the part of the sort
  key known before any estimate (stage preference, price bucket, GPU count). Once a group of equal
  prefixes holds a passing configuration that is final (not tight: the headroom tier of the key
  could still put a later one first), nothing after it can rank higher on that card: the rest is
  counted but not estimated. A configuration whose estimated key does not start with the
  predicted prefix (a cost model that came to depend on speed) turns the pruning off for its card.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import Card
from gpuwise.catalog.prices import price_per_gpu_hour
from gpuwise.errors import GpuwiseError
from gpuwise.estimate.api import CostOptions, check_valid, cost_of, estimate_memory, replica_users, scale_out, speed_of
from gpuwise.estimate.breakdown import MemoryResult
from gpuwise.estimate.kv_pool import budget_cap
from gpuwise.estimate.memory_infer import Serving, floor_limit, floor_of, on_card, serving_part
from gpuwise.estimate.serving_rules import card_fabric, rules_for
from gpuwise.estimate.speed import InferSpeed, TrainSpeed
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.plan.search import (
    Candidate,
    Engine,
    Shapes,
    Targets,
    configurations,
    engine_layouts,
    remade,
    requirement_failures,
    serving_workloads,
    target_failures,
)
from gpuwise.units import GiB

__all__ = ["Order", "Remembered", "SharedMemory", "SortKey", "remembered", "search"]

SortKey = Callable[[Candidate], tuple[float, ...]]
Config = tuple[Workload, Deployment, int, int]  # (workload, one replica's deployment, replicas, nodes)


def _whole(k: tuple[float, ...]) -> tuple[float, ...]:
    return k


def _always(c: Candidate) -> bool:
    return True


@dataclass(frozen=True)
class Order:
    """What the search needs of the ranking (plan.rank.search_order) to visit a card best first.

    `key` sorts the candidates. `prefix(card, gpus)`: items of the key known before any estimate,
    None to estimate everything. `known(key)`: those items read back from a full key, to check the
    prediction. `final(c)`: a passing candidate no configuration with a larger prefix can beat.
    `priced_only`: only priced candidates are ranked (rank.priced_only), and the key of one with no
    price reads nothing of its speed or cost."""

    key: SortKey
    prefix: Callable[[Card, int], tuple[float, ...]] | None = None
    known: Callable[[tuple[float, ...]], tuple[float, ...]] = _whole
    final: Callable[[Candidate], bool] = _always
    priced_only: bool = False  # a candidate with no price is never ranked: its key reads no speed


# Every setting of a deployment but its card (the card enters a memory estimate only as twin()).
_SETTINGS = tuple(f.name for f in fields(Deployment) if f.name != "card")

# What the search reads of a deployment, by its identity, as small numbers every request shares:
# its settings, and its memory twin for serving and for training (`_Request.twin`). Deployments
# are made once per card and settings (search.Shapes), so few; each is pinned beside its numbers
# (its identity cannot be reused while the entry lives). Cleared when full; a number is never
# given twice (a request running across the clearing keeps its meaning).
_TOKENS: dict[tuple[object, ...], int] = {}
_NEXT = itertools.count()
_KNOWN: dict[int, tuple[Deployment, tuple[int, int, int]]] = {}


def _token(what: tuple[object, ...]) -> int:
    found = _TOKENS.get(what)
    if found is None:
        found = _TOKENS[what] = next(_NEXT)
    return found


def _known(d: Deployment) -> tuple[int, int, int]:
    """d's settings, its serving twin and its training twin, as tokens."""
    found = _KNOWN.get(id(d))
    if found is None:
        if len(_KNOWN) >= 8192:
            _KNOWN.clear()
            _TOKENS.clear()
        card, settings = d.card, tuple(getattr(d, f) for f in _SETTINGS)
        large = rules_for(d).is_large(card.name, card.usable_bytes / GiB)
        found = _KNOWN[id(d)] = (d, (_token(("settings", *settings)),
                                     _token(("twin", card.usable_bytes, large, card_fabric(d), *settings)),
                                     _token(("twin", card.usable_bytes, False, False, *settings))))
    return found[1]


Head = tuple[float, ...]


@dataclass
class _Request:
    """One request's memo: keys are the ids of the request's own workloads and deployments, which
    `Shapes` keeps alive (and makes once each), so equal ids are equal values. A memory estimate
    is shared by every card with the same memory twin (`twin`)."""

    model: ModelArch
    t: Targets
    opts: CostOptions
    training: bool
    valid: dict[tuple[int, int, str], bool] = field(default_factory=dict)
    grid_valid: dict[tuple[int, str], list[bool]] = field(default_factory=dict)
    replica: dict[tuple[int, int], Workload] = field(default_factory=dict)
    same: dict[Workload, Workload] = field(default_factory=dict)
    parts: dict[tuple[int, int], Serving | GpuwiseError] = field(default_factory=dict)
    # the least bytes (Serving.least) of each grid workload's engine, by replicas and settings
    leasts: dict[tuple[int, int], list[float | None]] = field(default_factory=dict)
    memory: dict[tuple[int, int], MemoryResult] = field(default_factory=dict)
    speed: dict[tuple[int, int], InferSpeed | TrainSpeed] = field(default_factory=dict)
    # whether a card's configurations go without speed and cost (`speedless`), by card id
    bare: dict[str, bool] = field(default_factory=dict)
    speed_free: bool = False  # unpriced configurations need no speed: see `speedless`

    def speedless(self, card: Card) -> bool:
        """A configuration on a card no price file lists is never ranked where only priced plans
        are (`Order.priced_only`): it is listed as fitting without a price, by memory alone, unless
        a target reads its speed (then it must be met to be listed). Its speed and cost are not
        estimated."""
        found = self.bare.get(card.id)
        if found is None:
            found = self.bare[card.id] = self.speed_free and price_per_gpu_hour(
                card.id, self.opts.provider, self.opts.billing, self.opts.offers) is None
        return found

    def is_valid(self, w: Workload, d: Deployment) -> bool:
        """`check_valid`, once per workload, card and engine: what it reads of a deployment
        (tests/test_plan_caches.py holds it to that)."""
        key = (id(w), id(d.card), d.engine)
        found = self.valid.get(key)
        if found is None:
            try:
                check_valid(self.model, w, d)
                found = True
            except GpuwiseError:
                found = False  # refused as `estimate` would refuse it
            self.valid[key] = found
        return found

    def valid_grid(self, workloads: list[Workload], d: Deployment) -> list[bool]:
        """`is_valid` of each of the grid's workloads (the same list for every card of the
        request) on d's card and engine."""
        key = (id(d.card), d.engine)
        found = self.grid_valid.get(key)
        if found is None:
            found = self.grid_valid[key] = [self.is_valid(w, d) for w in workloads]
        return found

    def per_replica(self, w: Workload, replicas: int) -> Workload:
        """One engine's workload, the same object for the same value (replicas 4 and 6 of 8 users)."""
        if self.training:
            return w
        key = (id(w), replicas)
        found = self.replica.get(key)
        if found is None:
            one = remade(w, concurrency=replica_users(w, replicas)) if replicas > 1 else w  # as api.per_replica
            found = self.replica[key] = self.same.setdefault(one, one)
        return found

    def twin(self, d: Deployment) -> int:
        """What a memory estimate reads of a deployment: every setting but the card, and of the card
        its memory, whether the engine gives it large-GPU defaults and whether the TP group is one
        of more than 2 GPUs on an NVLink fabric (serving_rules.card_fabric; training reads the memory
        alone). Two cards that agree there get the same estimate: the 4 cards of
        23.64 GiB, the 4 of 79.15 GiB. tests/test_plan_speed_twins.py holds the estimator to it."""
        return _known(d)[2 if self.training else 1]  # one small number per twin

    def setting(self, d: Deployment) -> int:
        """Every setting of a deployment but its card, as one small number."""
        return _known(d)[0]

    def part(self, w: Workload, d: Deployment) -> Serving:
        """The card-free part of a serving memory estimate (`memory_infer.serving_part`), shared
        by every card with the same settings; one it refuses is refused for each of them."""
        key = (id(w), self.setting(d))
        part = self.parts.get(key)
        if part is None:
            try:
                part = serving_part(self.model, w, d)
            except GpuwiseError as e:
                part = e
            self.parts[key] = part
        if isinstance(part, GpuwiseError):
            raise part
        return part

    def estimate_memory(self, w: Workload, d: Deployment) -> MemoryResult:
        """As `estimate_memory`, serving from the shared card-free part."""
        if self.training:
            return estimate_memory(self.model, w, d)
        return on_card(self.model, w, d, self.part(w, d))

    def evaluate(self, config: Config) -> Candidate:
        """As `search.evaluate`, from the memo."""
        w, d, replicas, nodes = config
        w1 = self.per_replica(w, replicas)
        key = (id(w1), id(d))
        twin = (id(w1), self.twin(d))
        mem = self.memory.get(twin)
        if mem is None:
            mem = self.memory[twin] = self.estimate_memory(w1, d)
        nodes = d.nodes if self.training else nodes
        if not mem.fits:
            return Candidate(w1, d, mem, replicas=replicas, users=w.concurrency, nodes=nodes)
        if self.speedless(d.card):
            c = Candidate(w1, d, mem, replicas=replicas, users=w.concurrency, nodes=nodes)
            unmet = requirement_failures(c, self.t)  # target_failures reads nothing of it here
            return dataclasses.replace(c, unmet=tuple(unmet)) if unmet else c
        one = self.speed.get(key)
        if one is None:
            one = self.speed[key] = speed_of(self.model, w1, d, mem, inter_node_gbps=self.opts.inter_node_gbps)
        speed = scale_out(one, replicas)
        c = Candidate(w1, d, mem, speed, cost_of(d, speed, self.opts, replicas), replicas=replicas,
                      users=w.concurrency, nodes=nodes)
        unmet = requirement_failures(c, self.t) + target_failures(c, self.t)
        return dataclasses.replace(c, unmet=tuple(unmet)) if unmet else c


class SharedMemory:
    """A memory estimate (fit.MemoryFn) for many calls of one plan: serving shares the card-free
    part between calls with the same model and workload objects and settings, as the fixes the
    plan's reasons try on each card that fits nothing do (fit.py makes each changed workload once
    per value). The objects keyed by identity are kept alive beside their part."""

    def __init__(self) -> None:
        self._parts: dict[tuple[object, ...], tuple[ModelArch, Workload, Serving]] = {}

    def __call__(self, model: ModelArch, w: Workload, d: Deployment) -> MemoryResult:
        if w.is_training:
            return estimate_memory(model, w, d)
        return on_card(model, w, d, self._part(model, w, d))

    def fits(self, model: ModelArch, w: Workload, d: Deployment) -> bool:
        """`self(model, w, d).fits`, answered by the shortfall floor where it is above 0."""
        if w.is_training:
            return estimate_memory(model, w, d).fits
        part = self._part(model, w, d)
        cap = budget_cap(part.rules, d)
        if cap is not None and floor_of(part.least, cap) > 0:
            return False
        return on_card(model, w, d, part).fits

    def _part(self, model: ModelArch, w: Workload, d: Deployment) -> Serving:
        key = (id(model), id(w), _known(d)[0])
        found = self._parts.get(key)
        if found is None:
            found = self._parts[key] = (model, w, serving_part(model, w, d))
        return found[2]


class Remembered:
    """A sort key worked out once per candidate, by identity: whoever keys candidates with it
    keeps them alive while it is in use (the search and the ranking of one plan do: their lists
    hold every candidate they key)."""

    def __init__(self, key: SortKey) -> None:
        self.key = key
        self._keys: dict[int, tuple[float, ...]] = {}

    def __call__(self, c: Candidate) -> tuple[float, ...]:
        found = self._keys.get(id(c))
        if found is None:
            found = self._keys[id(c)] = self.key(c)
        return found


def remembered(order: Order) -> Order:
    """`order` with its key remembered (`Remembered`); one already remembered is kept."""
    return order if isinstance(order.key, Remembered) else dataclasses.replace(order, key=Remembered(order.key))


def _order(tried: list[tuple[int, Candidate]], key: SortKey) -> list[Candidate]:
    """Best first, as the exhaustive search sorts: passing, then fitting, then by the key, ties in
    the order the configurations were tried."""
    tried.sort(key=lambda ic: (not ic[1].ok, not ic[1].fits, key(ic[1]), ic[0]))
    return [c for _, c in tried]


def _short(c: Candidate) -> float:
    return c.memory.breakdown.required - c.memory.usable  # as rank.why_not measures the closest


def _settle(req: _Request, tried: list[tuple[int, Candidate]], aside: list[tuple[float, float, int]],
            config: Callable[[int], Config]) -> None:
    """Estimate what was set aside (least bytes, budget cap, place) where the plan's reasons read
    it. A card with something that fits and nothing that passes names the formats that fit among
    all it tried: every one is estimated. A card where nothing fits names its closest attempt (the
    least short, the first of equals in the search's order): those set aside are estimated least
    floor first while their floor could still tie or beat the closest so far; the rest are short by
    more."""
    if any(c.ok for _, c in tried):
        return
    if any(c.fits for _, c in tried):
        tried += [(i, req.evaluate(config(i))) for _, _, i in aside]
        return
    best = min((_short(c) for _, c in tried), default=math.inf)
    for floor, i in sorted((floor_of(least, cap), i) for least, cap, i in aside):
        if floor > best:
            break
        found = req.evaluate(config(i))
        tried.append((i, found))
        best = min(best, _short(found))


def _prune(order: Order, head: Head, group: list[tuple[int, Candidate]]) -> tuple[bool, bool]:
    """Whether the group's candidates keep the prefix's prediction, and whether one of them is
    final (no later group can beat it on the card)."""
    kept = not any(x.fits and order.known(order.key(x)) != head for _, x in group)
    return kept, kept and any(x.ok and order.final(x) for _, x in group)


Member = tuple[int, Config]  # a configuration and its place in the card's search order


def _visit(req: _Request, order: Order, groups: list[tuple[Head, list[Member]]],
           accepted: int) -> tuple[list[tuple[int, Candidate]], int]:
    """Estimate the groups of one card best prefix first (`groups` sorted), up to the first that
    holds a passing final candidate; one an estimate refuses is left out and uncounted. (Training:
    its memory has no floor to set configurations aside with.)"""
    tried: list[tuple[int, Candidate]] = []
    pruning = order.prefix is not None
    for head, members in groups:
        group: list[tuple[int, Candidate]] = []
        for i, c in members:
            try:
                group.append((i, req.evaluate(c)))
            except GpuwiseError:
                accepted -= 1  # refused by its estimate, as the exhaustive search leaves it out
        tried += group
        if pruning:
            pruning, final = _prune(order, head, group)  # a failed prediction: estimate everything
            if final:
                break
    return tried, accepted


def _card(req: _Request, configs: list[Config], order: Order,
          card: Card) -> tuple[list[tuple[int, Candidate]], int]:
    """The card's estimated configurations (training's) with their place in the search's order,
    and how many configurations it has that `check_valid` accepts (less those an estimate refused).

    One pass sorts each configuration `check_valid` accepts (the search yields runs of one
    workload and deployment: the last answer is reused by identity) into a group by its known
    prefix; `_visit` estimates the groups."""
    prefix = order.prefix
    groups: dict[Head, list[Member]] = {}
    heads: dict[int, Head] = {}  # by GPU count
    last_w: Workload | None = None
    last_d: Deployment | None = None
    valid, accepted = False, 0
    for i, c in enumerate(configs):
        w, d = c[0], c[1]
        if w is not last_w or d is not last_d:
            last_w, last_d = w, d
            valid = req.is_valid(w, d)
        if not valid:
            continue
        accepted += 1
        head: Head = ()
        if prefix is not None:
            gpus = d.gpus * d.nodes * c[2]
            found = heads.get(gpus)
            head = heads[gpus] = prefix(card, gpus) if found is None else found
        groups.setdefault(head, []).append((i, c))
    return _visit(req, order, sorted(groups.items()), accepted)


# Each engine-layout list's shape (search.engine_layouts keeps the lists), by its identity, the
# list pinned beside: its distinct deployments, each with the budget cap `_limit` makes of it, its
# settings token and how many layouts use it; and the layouts by GPU count (what the prefix reads
# of a layout), each with its place, deployment, replicas, nodes and the deployment's index. A
# token is never given to other settings (`_token`), so one kept here past a clearing of `_KNOWN`
# only misses the memos keyed by the newer one.
Layout = tuple[int, Deployment, int, int, int]
Fixed = tuple[Deployment, tuple[float, float], int, int]  # deployment, (cap, limit), settings, uses
_SHAPES: dict[int, tuple[list[Engine], list[Fixed], list[tuple[int, list[Layout]]]]] = {}


def _shape(serving: list[Engine]) -> tuple[list[Fixed], list[tuple[int, list[Layout]]]]:
    found = _SHAPES.get(id(serving))
    if found is None:
        if len(_SHAPES) >= 8192:
            _SHAPES.clear()
        at: dict[int, int] = {}
        deployments: list[Deployment] = []
        uses: list[int] = []
        by_gpus: dict[int, list[Layout]] = {}
        for j, (d, replicas, nodes) in enumerate(serving):
            if id(d) not in at:
                at[id(d)] = len(deployments)
                deployments.append(d)
                uses.append(0)
            uses[at[id(d)]] += 1
            by_gpus.setdefault(d.gpus * d.nodes * replicas, []).append((j, d, replicas, nodes, at[id(d)]))
        fixed = [(d, _limit(budget_cap(rules_for(d), d)), _known(d)[0], n)
                 for d, n in zip(deployments, uses, strict=True)]
        found = _SHAPES[id(serving)] = (serving, fixed, list(by_gpus.items()))
    return found[1], found[2]


def _limit(cap: float | None) -> tuple[float, float]:
    """A budget cap (0 for none) and its `floor_limit` (inf for none: nothing is set aside)."""
    return (0.0, math.inf) if cap is None else (cap, floor_limit(cap))


def _grid(req: _Request, workloads: list[Workload], serving: list[Engine], order: Order,
          card: Card) -> tuple[list[tuple[int, Candidate]], int]:
    """`_card` for serving's grid (`search.serving_grid`): configuration i is workload i // S with
    engine layout i % S. The prefix is worked out per GPU count, `check_valid` and the budget cap
    per workload and deployment, and a configuration is visited only with its group: its floor
    from the least bytes the request found for its workload, replicas and settings."""
    prefix, size = order.prefix, len(serving)
    fixed, by_gpus = _shape(serving)
    known = [(req.valid_grid(workloads, d), limits, token) for d, limits, token, _ in fixed]
    accepted = sum(valid.count(True) * n for (valid, _, _), (_, _, _, n) in zip(known, fixed, strict=True))
    layouts: dict[Head, list[list[Layout]]] = {}
    for gpus, members in by_gpus:
        layouts.setdefault(() if prefix is None else prefix(card, gpus), []).append(members)
    leasts = req.leasts
    tried: list[tuple[int, Candidate]] = []
    aside: list[tuple[float, float, int]] = []  # least bytes, budget cap, place
    pruning = prefix is not None
    for head, runs in sorted(layouts.items(), key=lambda hm: hm[0]):
        group: list[tuple[int, Candidate]] = []  # in any order: the candidates are sorted by place
        for j, d, replicas, nodes, at in itertools.chain.from_iterable(runs):
            valid, (cap, limit), token = known[at]
            row = leasts.get((replicas, token))  # by workload, the same on every card
            if row is None:
                row = leasts[replicas, token] = [None] * len(workloads)
            for k, w in enumerate(workloads):
                if not valid[k]:
                    continue
                try:
                    least = row[k]
                    if least is None:
                        least = row[k] = req.part(req.per_replica(w, replicas), d).least
                    if least > limit:  # short of the card even with nothing but the least: aside
                        aside.append((least, cap, k * size + j))
                    else:
                        group.append((k * size + j, req.evaluate((w, d, replicas, nodes))))
                except GpuwiseError:
                    accepted -= 1  # refused by its estimate, as the exhaustive search leaves it out
        tried += group
        if pruning and group:
            pruning, final = _prune(order, head, group)  # a failed prediction: estimate everything
            if final:
                break

    def config(i: int) -> Config:
        return (workloads[i // size], *serving[i % size])
    _settle(req, tried, aside, config)
    return tried, accepted


def search(model: ModelArch, w: Workload, cards: list[Card], t: Targets, opts: CostOptions,
           order: Order) -> tuple[dict[str, list[Candidate]], int, tuple[int, int]]:
    """Each card's configurations best first (those that cannot rank first on the card may be left
    out when the order has a prefix, and those that fit nothing unless a reason names them), how
    many configurations the search covered, and how many memory and speed estimates it ran."""
    req = _Request(model, t, opts, w.is_training, speed_free=order.priced_only and not t.reads_speed)
    order = remembered(order)  # the keys a search works out, once each
    shapes = Shapes()
    found: dict[str, list[tuple[int, Candidate]]] = {}
    offset: dict[str, int] = {}  # a card named twice: one list, its second configurations after the first's
    evaluated = 0
    workloads = [] if w.is_training else serving_workloads(model, w, t, shapes)  # the same on every card
    for card in cards:
        if w.is_training:
            configs = list(configurations(model, w, card, t, shapes))
            tried, n = _card(req, configs, order, card)
            size = len(configs)
        else:
            serving = engine_layouts(model, w, card, t, shapes)
            tried, n = _grid(req, workloads, serving, order, card)
            size = len(workloads) * len(serving)
        at = offset.get(card.id, 0)
        found.setdefault(card.id, []).extend((at + i, c) for i, c in tried)
        offset[card.id] = at + size
        evaluated += n
    return {cid: _order(tried, order.key) for cid, tried in found.items()}, evaluated, \
        (len(req.memory), len(req.speed))
