"""Rank the candidates that pass by one objective, and explain every card that lost in the
objective's own unit."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import Card
from gpuwise.catalog.prices import currency_word
from gpuwise.estimate.api import CostOptions, estimate_memory
from gpuwise.estimate.cost import job_cost
from gpuwise.estimate.fit import suggest_fixes
from gpuwise.estimate.speed import InferSpeed
from gpuwise.estimate.workload import Workload
from gpuwise.i18n import Text
from gpuwise.plan.fast import Order, SharedMemory, SortKey, remembered, search
from gpuwise.plan.search import Candidate, Targets, candidates, precisions
from gpuwise.units import GiB

SCHEMA_VERSION = 2  # of the `gpuwise plan --json` object; docs/json.md says what changed

# Costs within 3 % of each other count as equal: the estimate is not finer than that, and a tie
# then goes to the smaller job (fewer GPUs), not to whichever rounding wins.
TIE = 1.03


@dataclass(frozen=True)
class Objective:
    """What the ranking minimises (or, for speed, maximises), and its unit in both languages."""

    key: str  # per_hour | per_run | per_million_tokens | tokens_per_s
    unit: Text
    label: Text  # "cheapest per hour"
    higher_is_better: bool = False

    @property
    def short(self) -> str:
        """The unit after a currency, in tables and comparisons: CNY/h, CNY/Mtok, CNY/run."""
        return {"per_hour": "/h", "per_run": "/run", "per_million_tokens": "/Mtok"}.get(self.key, "")

    def value(self, c: Candidate) -> float | None:
        if self.key == "tokens_per_s":
            return _tokens_per_s(c)
        if c.cost is None:
            return None
        value = getattr(c.cost, self.key)
        return float(value) if value is not None else None

    def show(self, value: float, currency: str) -> str:
        if self.key == "tokens_per_s":
            return f"{value:,.0f} tok/s"
        digits = 0 if self.key == "per_run" else 2
        return f"{value:,.{digits}f} {currency}{self.short}"

    def show_zh(self, value: float, currency: str) -> str:
        if self.key == "tokens_per_s":
            return f"{value:,.0f} token/s"
        digits = 0 if self.key == "per_run" else 2
        return f"{value:,.{digits}f} {currency_word(currency, 'zh')}{self.unit.zh.strip()}"  # 元/时 as on the page

    def to_dict(self) -> dict[str, object]:
        return {"key": self.key, "unit": self.unit.en, "unit_zh": self.unit.zh, "short": self.short,
                "label": self.label.en, "label_zh": self.label.zh,
                "higher_is_better": self.higher_is_better}


def objective_for(objective: str, stage: str | None, w: Workload, opts: CostOptions) -> Objective:
    """The one unit a plan is ranked in, printed with the plan and used by every "why not"."""
    if objective == "speed":
        return Objective("tokens_per_s", Text(" tok/s", " tok/s"), Text("fastest", "最快"), True)
    # the scale stage compares linked multi-GPU jobs by what each token costs, so a bigger job
    # wins only when it is not dearer per token (ties go to fewer GPUs)
    if objective == "cost-per-token" or stage == "scale" or (w.is_training and not opts.train_tokens):
        what = Text(" per million tokens trained", "/百万训练 token") if w.is_training \
            else Text(" per million output tokens", "/百万输出 token")
        return Objective("per_million_tokens", what, Text("lowest cost per token", "单位 token 成本最低"))
    if w.is_training:
        return Objective("per_run", Text(" per run", "/整次训练"), Text("cheapest run", "整次训练最便宜"))
    return Objective("per_hour", Text("/h", "/时"), Text("cheapest per hour", "每小时最便宜"))


def _tokens_per_s(c: Candidate) -> float:
    if c.speed is None:
        return 0.0
    return c.speed.throughput_tokens_per_s if isinstance(c.speed, InferSpeed) else c.speed.tokens_per_s


def _bucket(value: float | None) -> float:
    return math.floor(math.log(value) / math.log(TIE)) if value is not None and 0 < value < math.inf else math.inf


def priced_only(obj: Objective, stage: str | None) -> bool:
    """Whether only priced plans are ranked: by cost for certain, and by speed within a stage,
    which the guides price too. Plain --objective speed may rank a card that has no price."""
    return not obj.higher_is_better or stage is not None


def sort_key(obj: Objective, stage: str | None) -> SortKey:
    """Headroom first, then the objective (ties within 3 %), then fewer GPUs, then speed. A
    configuration that fits at the estimate but not at the top of its 80 % memory band ("tight":
    a one-in-ten chance of running out of memory) ranks below every one that fits at the top, so a
    LoRA without activation checkpointing at 23.6 of 23.6 GiB loses to the same card with it. The
    validate stage puts one-GPU configurations first: it proves the pipeline on the cheapest
    machine that runs it. Where only priced plans are ranked, one with no price is never ranked:
    it is keyed by headroom and GPUs alone (its card is listed as fitting at its fewest GPUs, at
    the first precision tried there, the most exact), so the search need not estimate its speed."""
    one_first = stage == "validate"
    unranked = priced_only(obj, stage)

    def key(c: Candidate) -> tuple[float, ...]:
        if unranked and c.cost is None:
            return float(one_first and c.gpus_total > 1), float(c.tight), math.inf, c.gpus_total, 0.0
        return (float(one_first and c.gpus_total > 1), float(c.tight), _value_key(obj, c), c.gpus_total,
                -_tokens_per_s(c))
    return key


def _value_key(obj: Objective, c: Candidate) -> float:
    """The objective's place in the key: its 3 % bucket, negated where higher is better."""
    v = obj.value(c)
    if obj.higher_is_better:
        return -_bucket(v) if v else math.inf
    return _bucket(v)


# The hourly prefixes by (card, GPUs), kept across requests for the same price rows, provider,
# billing and stage preference: pure functions of those. The rows by the identity of their tuple
# (prices.price_offers keeps one while no price file changes), pinned beside. The shipped files
# read when no offers are given may change, so those stay with their request.
_PREFIXES: dict[tuple[object, ...], tuple[object, dict[tuple[str, int], tuple[float, ...]]]] = {}


def _prefixes(opts: CostOptions, one_first: bool) -> dict[tuple[str, int], tuple[float, ...]]:
    if opts.offers is None:
        return {}
    key = (id(opts.offers), opts.provider, opts.billing, one_first)
    found = _PREFIXES.get(key)
    if found is None or found[0] is not opts.offers:
        if len(_PREFIXES) >= 64:
            _PREFIXES.clear()
        found = _PREFIXES[key] = (opts.offers, {})
    return found[1]


def search_order(obj: Objective, stage: str | None, opts: CostOptions) -> Order:
    """The sort key, and for an hourly objective the part of it known before any estimate (the
    stage's preference, the offer's price x GPUs, the GPU count) for the search to visit cheap
    configurations first and stop at the first group with a passing one that is not tight."""
    key = sort_key(obj, stage)
    unranked = priced_only(obj, stage)
    if obj.key != "per_hour":
        return Order(key, priced_only=unranked)
    one_first = stage == "validate"
    made = _prefixes(opts, one_first)

    def prefix(card: Card, gpus: int) -> tuple[float, ...]:
        found = made.get((card.id, gpus))
        if found is None:
            cost = job_cost(card.id, gpus, provider=opts.provider, billing=opts.billing, offers=opts.offers)
            found = made[card.id, gpus] = (float(one_first and gpus > 1),
                                           _bucket(cost.per_hour if cost else None), gpus)
        return found

    def known(k: tuple[float, ...]) -> tuple[float, ...]:
        return k[0], k[2], k[3]  # the key without its headroom tier and speed

    def final(c: Candidate) -> bool:
        return not c.tight  # a tight one may still lose to a dearer group that fits at the top
    return Order(key, prefix, known, final, priced_only=unranked)


@dataclass(frozen=True)
class WhyNot:
    """Why one card is not among the plans, from its closest attempt."""

    card: str
    gpus: int | None
    weights: str | None
    reasons: tuple[Text, ...]

    def to_dict(self) -> dict[str, object]:
        return {"card": self.card, "gpus": self.gpus, "weights": self.weights,
                "reasons": [r.en for r in self.reasons], "reasons_zh": [r.zh for r in self.reasons]}


def _what(c: Candidate) -> Text:
    d = c.deployment
    if c.replicas > 1:
        return Text(f"{d.card.name} x{c.gpus_total} ({c.replicas} replicas x TP{d.gpus}), {c.workload.weights}",
                    f"{d.card.name} x{c.gpus_total}（{c.replicas} 个副本 x TP{d.gpus}），{c.workload.weights}")
    return Text(f"{d.card.name} x{c.gpus_total}, {c.workload.weights}",
                f"{d.card.name} x{c.gpus_total}，{c.workload.weights}")


def _ckpt_words(c: Candidate) -> Text:
    ckpt = c.workload.grad_ckpt
    if ckpt == "none":
        return Text("without activation checkpointing", "不做激活检查点")
    return Text(f"with {ckpt} activation checkpointing", f"启用 {ckpt} 激活检查点")


def _tight_words(c: Candidate) -> Text:
    """Why a tight candidate ranks lower, with its numbers."""
    top, usable = (c.required_high or 0.0) / GiB, c.memory.usable / GiB
    return Text(f"fits only at the estimate, not at the top of its 80 % memory range ({top:,.1f} GiB of "
                f"{usable:,.1f} GiB usable per GPU)",
                f"仅按估算放得下，按显存 80% 区间上限放不下（{top:,.1f} GiB，每卡可用 {usable:,.1f} GiB）")


def _passed_over(c: Candidate, tried: list[Candidate], key: SortKey) -> Candidate | None:
    """A passing, tight configuration of c's card that would have ranked ahead of c on the
    objective, GPUs and speed alone (the headroom tier aside)."""
    if c.tight:
        return None
    alt = next((x for x in tried if x.ok and x.tight), None)  # the best tight one: the list is sorted

    def untiered(x: Candidate) -> tuple[float, ...]:
        k = key(x)
        return k[:1] + k[2:]
    return alt if alt is not None and untiered(alt) < untiered(c) else None


def _alternative(c: Candidate) -> Text:
    what = _what(c)
    if not c.workload.is_training:
        return what
    how = _ckpt_words(c)
    return Text(f"{what.en} {how.en}, micro-batch {c.workload.micro_batch}",
                f"{what.zh}，{how.zh}，micro-batch {c.workload.micro_batch}")


def deciding_reason(c: Candidate, obj: Objective, rank: int, t: Targets, winner: Candidate | None = None,
                    tried: list[Candidate] | None = None, key: SortKey | None = None) -> Text:
    """Why plan #`rank` + 1 is where it is. A tight plan below one that is not says so; every plan
    names the cheaper, tight variant of its card it was preferred to."""
    what = _what(c)
    v = obj.value(c)
    shown = Text(obj.show(v, c.cost.currency if c.cost else ""), obj.show_zh(v, c.cost.currency if c.cost else "")) \
        if v is not None else Text("", "")
    alt = _passed_over(c, tried or [], key) if key is not None else None
    if rank > 0:
        if c.tight and winner is not None and not winner.tight:
            tight = _tight_words(c)
            return Text(f"{what.en}: {shown.en}, ranks #{rank + 1}: it {tight.en}, so it ranks below the plans that "
                        "fit at the top",
                        f"{what.zh}：{shown.zh}，排第 {rank + 1}：{tight.zh}，因此排在按上限也放得下的方案之后")
        head = Text(f"{what.en}: {shown.en}, ranks #{rank + 1}", f"{what.zh}：{shown.zh}，排第 {rank + 1}")
        if alt is None:
            return head
    else:
        head = _first(what, shown, obj, t)
    if alt is not None:  # the card's cheaper variant that fits only at the estimate is named, never silently gone
        av, cur = obj.value(alt) or 0.0, alt.cost.currency if alt.cost else ""
        other, tight = _alternative(alt), _tight_words(alt)
        return Text(f"{head.en}; preferred to {other.en} ({obj.show(av, cur)}), which {tight.en}",
                    f"{head.zh}；优先于 {other.zh}（{obj.show_zh(av, cur)}），后者{tight.zh}")
    if c.tight:
        return Text(f"{head.en}; none of them fits at the top of its 80 % memory range (see the notes)",
                    f"{head.zh}；其中没有按显存 80% 区间上限也放得下的（见备注）")
    return head


def _first(what: Text, shown: Text, obj: Objective, t: Targets) -> Text:
    if t.given:
        given = ", ".join(FLAGS.get(g, g) for g in t.given)
        return Text(f"{what.en}: {obj.label.en} ({shown.en}) of the configurations that fit and meet every "
                    f"target ({given})",
                    f"{what.zh}：放得下且满足全部目标（{given}）的配置中{obj.label.zh}（{shown.zh}）")
    return Text(f"{what.en}: {obj.label.en} ({shown.en}) of the configurations that fit; no targets were set "
                "(add --max-ttft, --min-throughput, --min-tokens-per-s-per-user or --budget)",
                f"{what.zh}：放得下的配置中{obj.label.zh}（{shown.zh}）；未设目标"
                "（可加 --max-ttft、--min-throughput、--min-tokens-per-s-per-user 或 --budget）")


# The flag behind each target, for the reasons' wording.
FLAGS = {"budget_per_hour": "--budget", "budget_per_run": "--budget", "min_throughput": "--min-throughput",
         "max_ttft": "--max-ttft", "min_tokens_per_s_per_user": "--min-tokens-per-s-per-user",
         "ecc": "--require ecc", "nvlink": "--require nvlink"}


def _versus(best: Candidate, winner: Candidate, obj: Objective) -> Text:
    """The rejected card's objective against plan #1's, larger number for the loser."""
    vb, vw = obj.value(best), obj.value(winner)
    cur = winner.cost.currency if winner.cost else ""
    if vb is None or vw is None:
        return Text("meets the targets but ranks lower", "满足目标，但排名靠后")
    if best.tight and not winner.tight:
        tight = _tight_words(best)
        return Text(f"meets the targets at {obj.show(vb, cur)} vs {obj.show(vw, cur)} for plan #1, but it "
                    f"{tight.en}; plan #1 fits at the top of its range",
                    f"满足目标，{obj.show_zh(vb, cur)}，方案 #1 为 {obj.show_zh(vw, cur)}，但{tight.zh}；"
                    "方案 #1 按区间上限也放得下")
    worse = vb < vw if obj.higher_is_better else vb > vw
    if not worse or _bucket(vb) == _bucket(vw):
        return Text(f"meets the targets at {obj.show(vb, cur)}, within 3% of plan #1's {obj.show(vw, cur)}, "
                    f"but needs {best.gpus_total} GPUs vs {winner.gpus_total}"
                    if best.gpus_total != winner.gpus_total else
                    f"meets the targets at {obj.show(vb, cur)}, within 3% of plan #1's {obj.show(vw, cur)}, "
                    "and is slower",
                    f"满足目标，{obj.show_zh(vb, cur)}，与方案 #1 的 {obj.show_zh(vw, cur)} 相差不到 3%，"
                    + (f"但需要 {best.gpus_total} 张卡（方案 #1 为 {winner.gpus_total}）"
                       if best.gpus_total != winner.gpus_total else "但更慢"))
    verb, verb_zh = ("is slower", "更慢") if obj.higher_is_better else ("costs more", "更贵")
    return Text(f"meets the targets but {verb}: {obj.show(vb, cur)} vs {obj.show(vw, cur)} for plan #1",
                f"满足目标，但{verb_zh}：{obj.show_zh(vb, cur)}，方案 #1 为 {obj.show_zh(vw, cur)}")


def _row(c: Candidate, reasons: list[Text]) -> WhyNot:
    return WhyNot(c.deployment.card.id, c.gpus_total, c.workload.weights, tuple(reasons))


def why_not(card: Card, tried: list[Candidate], winner: Candidate | None, obj: Objective,
            model: ModelArch | None = None, memory: SharedMemory | None = None,
            key: SortKey | None = None) -> WhyNot:
    """The one line that says why `card` lost, from its closest attempt (`tried` sorted best first);
    `memory` estimates the fixes it tries (estimate_memory when None). With the ranking's `key`, the
    card's tight variant that would otherwise have been its best is named too (a 7B LoRA on one
    4090 that fits only at the estimate, where two fit at the top: "does one 4090 do?" is answered)."""
    passing = [c for c in tried if c.ok]
    if passing:
        best = passing[0]
        reasons = [_versus(best, winner, obj)] if winner else [Text("meets the targets but ranks lower",
                                                                    "满足目标，但排名靠后")]
        alt = _passed_over(best, passing, key) if key is not None else None
        if alt is not None:
            other, tight, need = _alternative(alt), _tight_words(alt), alt.memory.breakdown.required / GiB
            reasons.append(Text(f"{other.en} needs {need:,.2f} GiB: it {tight.en}",
                                f"{other.zh} 需要 {need:,.2f} GiB：{tight.zh}"))
        return _row(best, reasons)
    fitting = [c for c in tried if c.fits]
    if fitting:
        best = fitting[0]
        fmts = sorted({c.workload.weights for c in fitting})
        extra = [Text(f"fits only at {', '.join(fmts)}", f"仅在 {', '.join(fmts)} 下放得下")] \
            if len(fmts) < len({c.workload.weights for c in tried}) else []
        return _row(best, [*extra, *best.failures])
    if not tried:
        return WhyNot(card.id, None, None, (Text("no configuration could be evaluated", "没有可评估的配置"),))
    closest = min(tried, key=lambda c: c.memory.breakdown.required - c.memory.usable)
    short_gib = (closest.memory.breakdown.required - closest.memory.usable) / GiB
    short = f"{short_gib:,.2f}" if short_gib < 1 else f"{short_gib:,.1f}"  # never "short by 0.0"
    n = closest.gpus_total
    fixes = suggest_fixes(model, closest.workload, closest.deployment, closest.memory, memory or estimate_memory,
                          limit=2, fits_fn=memory.fits if memory else None) if model is not None else ()
    return _row(closest, [Text(f"does not fit even on {n} GPU(s) at {closest.workload.weights}: "
                               f"short by {short} GiB per GPU",
                               f"即使 {n} 卡、{closest.workload.weights} 也放不下：每卡差 {short} GiB"),
                          *(Text("it would fit if you " + f.en, "若" + f.zh + "则可放下") for f in fixes)])


def _unpriced(tried: list[Candidate]) -> WhyNot:
    smallest = min((c for c in tried if c.ok), key=lambda c: c.gpus_total)
    return _row(smallest, [Text(f"fits and meets the targets on {smallest.gpus_total} GPU(s), but no price "
                                "file lists this card: add one with --prices FILE",
                                f"在 {smallest.gpus_total} 张卡上放得下且满足目标，但价格文件中没有这张卡："
                                "可用 --prices FILE 补充")])


@dataclass(frozen=True)
class PlanResult:
    plans: list[Candidate]
    reasons: list[Text]
    rejected: list[WhyNot]
    unpriced: list[WhyNot]  # fits and meets the targets, but the objective needs a price
    evaluated: int  # configurations the search covered
    objective: Objective
    notes: tuple[Text, ...] = ()
    estimates: tuple[int, int] = (0, 0)  # memory and speed estimates run (not in the JSON)


def _search(model: ModelArch, w: Workload, cards: list[Card], t: Targets, opts: CostOptions,
            order: Order, exhaustive: bool) -> tuple[dict[str, list[Candidate]], int, tuple[int, int]]:
    """Each card's tried configurations, best first, the count, and the memory and speed estimates
    run. `exhaustive`: every one estimated in full, one by one (the reference plan.fast is tested
    against)."""
    if not exhaustive:
        return search(model, w, cards, t, opts, order)
    by_card: dict[str, list[Candidate]] = {c.id: [] for c in cards}
    evaluated = 0
    for cand in candidates(model, w, cards, t, opts):
        by_card[cand.deployment.card.id].append(cand)
        evaluated += 1
    for tried in by_card.values():
        tried.sort(key=lambda c: (not c.ok, not c.fits, order.key(c)))
    return by_card, evaluated, (evaluated, sum(c.fits for x in by_card.values() for c in x))


def plan(model: ModelArch, w: Workload, cards: list[Card], t: Targets, opts: CostOptions,
         top: int = 5, excluded: dict[str, Text] | None = None, exhaustive: bool = False) -> PlanResult:
    """Ranked plans, a reason for every other card, and the cards that fit but have no price.
    `excluded` maps card ids left out before the search to the reason (a software stack)."""
    obj = objective_for(t.objective, t.stage, w, opts)
    order = remembered(search_order(obj, t.stage, opts))  # each candidate keyed once, search and ranking alike
    excluded = excluded or {}
    searched = [c for c in cards if c.id not in excluded]
    by_card, evaluated, estimates = _search(model, w, searched, t, opts, order, exhaustive)
    notes: tuple[Text, ...] = ()
    if t.weights == "auto" and not w.is_training and not any(x and x[0].ok for x in by_card.values()):
        low = dataclasses.replace(t, low_bit=True)
        order = remembered(search_order(obj, t.stage, opts))  # afresh: the first search's candidates go
        by_card, more, again = _search(model, w, searched, low, opts, order, exhaustive)
        evaluated += more
        estimates = (estimates[0] + again[0], estimates[1] + again[1])
        tried_fmts = ", ".join(precisions(model, w, t))
        notes = (Text(f"Nothing fits the constraints at {tried_fmts}, so 4-bit weights were tried too "
                      "(see each plan's quality cost).",
                      f"在 {tried_fmts} 下没有满足条件的配置，因此也尝试了 4-bit 权重（质量代价见各方案）。"),)
    key = order.key
    heads = [x[0] for x in by_card.values() if x and x[0].ok]
    priced = priced_only(obj, t.stage)
    rankable = [c for c in heads if obj.value(c) is not None and (c.cost is not None or not priced)]
    ranked = sorted(rankable, key=key)
    plans = ranked[:top]
    winner = plans[0] if plans else None
    shown = {c.deployment.card.id for c in plans}
    ranked_ids = {id(c) for c in rankable}  # by identity: a candidate's == compares its whole estimate
    unpriced_ids = {c.deployment.card.id for c in heads if id(c) not in ranked_ids}
    rejected = [WhyNot(cid, None, None, (why,)) for cid, why in excluded.items()]
    memory = SharedMemory()  # the fixes tried on each card that fits nothing share their parts
    rejected += [why_not(card, by_card[card.id], winner, obj, model, memory, key) for card in searched
                 if card.id not in shown and card.id not in unpriced_ids]
    unpriced = [_unpriced(by_card[cid]) for cid in by_card if cid in unpriced_ids]
    reasons = [deciding_reason(c, obj, i, t, winner, by_card[c.deployment.card.id], key)
               for i, c in enumerate(plans)]
    return PlanResult(plans=plans, reasons=reasons, rejected=rejected, unpriced=unpriced,
                      evaluated=evaluated, objective=obj, notes=notes, estimates=estimates)
