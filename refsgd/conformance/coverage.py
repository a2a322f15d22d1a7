"""What the conformance configurations exercise, checked against the registry and the options
table, so that a green table means every option that changes a method's trajectory was tried:
for every method, each of its options recorded as TRAJECTORY (its ``APPLIES`` entries less those
that change only the roundings, the output or the timing) takes a value other than the method's
default in at least one of its configurations; so does ``--tau`` where the method accumulates
micro-batches; the learning rate changes within the steps of one of them (a backend is given
every step's rate: the schedule a reading of which it could get wrong); and one runs at a world
size that is not a power of two (a sum over 3 workers is where an order or a divisor shows).
``tests/test_conformance_coverage.py`` runs the check; a new method or option that no
configuration exercises fails it, naming the method and the option."""

from refsgd import options, registry


def uncovered(configurations):
    """One line per gap, ``METHOD: --option never differs from its default (...)``; [] when the
    ``configurations`` (refsgd.conformance.Configuration) cover every method and option."""
    gaps = []
    for name, m in registry.METHODS.items():
        mine = [c for c in configurations if c.method == name]
        if not mine:
            gaps.append(f"{name}: no configuration")
            continue
        runs = [options.resolve(options.from_keywords(dict(c.options, algo=name))) for c in mine]
        keys = [k for k in options.APPLIES[name] if options.BY_NAME[k].record == options.TRAJECTORY]
        if m.micro_batches == registry.TAU:
            keys.append("tau")
        for k in keys:
            default = options.default(name, k)
            if all(getattr(r, k) == default for r in runs):
                gaps.append(f"{name}: {options.BY_NAME[k].flags} never differs from its default ({default!r}) in "
                            f"its configurations ({', '.join(c.name for c in mine)})")
        if all(r.schedule == "constant" for r in runs):
            gaps.append(f"{name}: the learning rate is constant in every configuration (--schedule)")
        if all(c.workers & (c.workers - 1) == 0 for c in mine):
            gaps.append(f"{name}: every configuration runs at a world size that is a power of two "
                        f"({', '.join(sorted({str(c.workers) for c in mine}))})")
    return gaps
