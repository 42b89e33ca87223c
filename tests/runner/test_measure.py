import itertools

from accelml.runner.timing import repeat_until_stable


def fake_rounds(values):
    clock = iter(values)
    calls = []

    def one_round(index):
        calls.append(index)
        return {"fit": next(clock)}

    return one_round, calls


def test_warmup_is_run_but_not_counted():
    one_round, calls = fake_rounds([100.0, 1.0, 1.0, 1.0])
    outcome = repeat_until_stable(one_round, min_repeats=3, max_repeats=5, warmup=1)
    assert calls == [-1, 0, 1, 2]
    assert outcome.timings["fit"].samples == (1.0, 1.0, 1.0)
    assert outcome.timings["fit"].warmup_samples == (100.0,)
    assert outcome.stopped_because == "converged"


def test_noisy_rounds_run_to_the_maximum_and_are_flagged():
    one_round, calls = fake_rounds(itertools.cycle([1.0, 2.0, 0.5]))
    outcome = repeat_until_stable(one_round, min_repeats=3, max_repeats=7, warmup=0)
    assert outcome.rounds == 7 and outcome.stopped_because == "max_repeats"
    assert outcome.timings["fit"].noisy


def test_every_phase_must_be_stable():
    values = itertools.cycle([(1.0, 0.1), (1.0, 0.3)])

    def one_round(index):
        fit, predict = next(values)
        return {"fit": fit, "predict": predict}

    outcome = repeat_until_stable(one_round, min_repeats=2, max_repeats=6, warmup=0)
    assert outcome.rounds == 6
    assert not outcome.timings["fit"].noisy and outcome.timings["predict"].noisy


def test_fixed_count_and_time_budget():
    one_round, _ = fake_rounds(itertools.repeat(1.0))
    fixed = repeat_until_stable(one_round, min_repeats=4, max_repeats=4, warmup=0)
    assert (fixed.rounds, fixed.stopped_because) == (4, "fixed")
    noisy, _ = fake_rounds(itertools.cycle([1.0, 3.0]))
    budget = repeat_until_stable(noisy, min_repeats=2, max_repeats=50, warmup=0, max_seconds=0)
    assert (budget.rounds, budget.stopped_because) == (2, "max_seconds")


def test_a_phase_whose_first_run_takes_seconds_counts_it_instead_of_warming_up():
    """Issue 17: a 15-second fit is not run once more just to be thrown away; the round's
    quick predict had its warm-up in it and gets one sample fewer; the note says why."""
    clock = iter([(15.0, 0.3), (14.0, 0.2), (14.5, 0.2), (14.2, 0.2)])
    calls = []

    def one_round(index):
        calls.append(index)
        fit, predict = next(clock)
        return {"fit": fit, "predict": predict}

    outcome = repeat_until_stable(one_round, min_repeats=3, max_repeats=3, warmup=1,
                                  skip_warmup_after=2.0)
    assert calls == [-1, 1, 2]                       # three fits in all, not four
    assert outcome.timings["fit"].samples == (15.0, 14.0, 14.5)
    assert outcome.timings["predict"].samples == (0.2, 0.2)
    assert outcome.timings["predict"].warmup_samples == (0.3,)
    assert (outcome.rounds, outcome.warmup_rounds, outcome.counted_rounds) == (3, 0, (-1, 1, 2))
    assert outcome.warmup_note.startswith("fit: the first run took 15 s (>= 2 s)")
    assert "predict" not in outcome.warmup_note


def test_quick_phases_and_no_threshold_keep_the_warm_up():
    for threshold in (10.0, None):      # 5 s is under 10 s; None: always warm up
        one_round, calls = fake_rounds([5.0, 1.0, 1.0, 1.0])
        outcome = repeat_until_stable(one_round, min_repeats=3, max_repeats=3, warmup=1,
                                      skip_warmup_after=threshold)
        assert calls == [-1, 0, 1, 2] and outcome.warmup_note == ""
        assert outcome.timings["fit"].warmup_samples == (5.0,) and outcome.warmup_rounds == 1
