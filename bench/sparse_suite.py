"""The papers' sparse experiments as cases of `sparse_bench.run_case`, side by side in one run:

* Perez-Nieves & Goodman: 784-h-h-10 on Fashion-MNIST (latency-coded), N-MNIST and SHD,
  hidden 200 and 400, a B_th sweep up to 0.95, and 5 hidden layers of 300;
* Finkbeiner & Neftci: the one-sided rule (theta_grad = 0.9 threshold) on SHD and N-MNIST
  with 2 x 1,472 = 2,944 hidden neurons, at natural activity (random initial weights) and
  fixed activity (every hidden neuron spikes at every step: the worst case), whole training
  step timed;
* `exp_sparse_width`: dense against one B_th as both hidden layers widen (Perez-Nieves &
  Goodman's Fig. 4C), on weights trained densely for a few minibatches.

Three sizes: FULL (the papers' settings, scaled to what one engine model can hold here),
QUICK (`run.py sparse --quick`: minutes on a shared 2-core machine) and TINY (the smoke test).
"""

from __future__ import annotations

from dataclasses import dataclass

from event_tasks import event_task, latency_task
from sparse_bench import SparseCase, run_case

from popsnn import data, sparse

ONE_SIDED = 0.9  # Finkbeiner & Neftci's secondary threshold, as a fraction of the threshold


@dataclass(frozen=True)
class Size:
    steps: int
    batch: int
    hidden: tuple  # Perez-Nieves & Goodman's 200 and 400
    deep: int  # their 5-hidden-layer network's width (300)
    wide: int  # Finkbeiner & Neftci: 2 x 1,472 = 2,944 hidden neurons
    train_steps: int
    test_images: int
    recordings: tuple  # generated N-MNIST / SHD recordings: (train, test)
    b_ths: tuple
    image_dataset: str = "fashion-mnist"


FULL = Size(100, 256, (200, 400), 300, 1472, 150, 2000, (4000, 1000), (0.05, 0.1, 0.2, 0.5, 0.95))
QUICK = Size(25, 32, (200, 400), 300, 400, 150, 512, (1024, 512), (0.05, 0.2, 0.5, 0.95))
TINY = Size(4, 8, (8, 12), 8, 16, 2, 16, (20, 8), (0.2, 0.95), image_dataset="mnist")


def seed003_cases(size: Size, tasks: dict) -> list:
    windows = tuple(sparse.window(b) for b in size.b_ths)
    small, large = size.hidden
    common = dict(
        steps=size.steps,
        batch=size.batch,
        train_steps=size.train_steps,
        test_images=size.test_images,
        paper="Perez-Nieves & Goodman",
    )
    cases = []
    if tasks.get("image"):
        cases += [
            SparseCase(
                f"seed003-{size.image_dataset}-h{small}",
                tasks["image"],
                small,
                rules=windows,
                **common,
            ),
            SparseCase(
                f"seed003-{size.image_dataset}-5x{size.deep}",
                tasks["image"],
                size.deep,
                rules=(sparse.window(size.b_ths[len(size.b_ths) // 2]),),
                layers=5,
                init_gain=3.0,  # at 1, layers 2-5 never fire at initialisation (T=25)
                **common,
            ),
        ]
    cases += [
        SparseCase(f"seed003-nmnist-h{small}", tasks["nmnist"], small, rules=windows, **common),
        SparseCase(f"seed003-shd-h{large}", tasks["shd"], large, rules=windows, **common),
    ]
    return cases


def seed002_cases(size: Size, tasks: dict) -> list:
    rules = (sparse.one_sided(ONE_SIDED),)
    cases = []
    for name in ("shd", "nmnist"):
        for activity in ("natural", "fixed"):
            cases.append(
                SparseCase(
                    f"seed002-{name}-{activity}",
                    tasks[name],
                    size.wide,
                    steps=size.steps,
                    batch=size.batch,
                    rules=rules,
                    train_steps=size.train_steps if activity == "natural" else 0,
                    test_images=size.test_images,
                    activity=activity,
                    paper="Finkbeiner & Neftci",
                )
            )
    return cases


def suite_tasks(size: Size) -> tuple:
    """The data of every case, and the reason a data set is missing (Fashion-MNIST is an
    optional download: its cases are then reported as skipped, the rest still run)."""
    tasks, skipped = {}, {}
    try:
        tasks["image"] = latency_task(size.image_dataset, size.steps)
    except (FileNotFoundError, data.DataError) as err:
        skipped[size.image_dataset] = str(err)
    for name in ("nmnist", "shd"):
        tasks[name] = event_task(name, size.steps, *size.recordings)
    return tasks, skipped


def exp_sparse(size: Size = QUICK, repeats: int = 3, only=None) -> list:
    """Every case of both papers, dense beside each rule; `only`: the names of the cases to
    run (all when None)."""
    tasks, skipped = suite_tasks(size)
    rows = [
        {"experiment": "sparse", "case": f"seed003-{name}", "skipped": reason}
        for name, reason in skipped.items()
    ]
    for case in seed003_cases(size, tasks) + seed002_cases(size, tasks):
        if only is None or case.name in only:
            rows += run_case(case, repeats)
    return rows


def two_layer_cases(size: Size) -> list:
    """Perez-Nieves & Goodman's two-hidden-layer cases (the ones with their accuracy figures):
    Fashion-MNIST and N-MNIST at the smaller hidden width, SHD at the larger."""
    small, large = size.hidden
    return [
        f"seed003-{size.image_dataset}-h{small}",
        f"seed003-nmnist-h{small}",
        f"seed003-shd-h{large}",
    ]


def exp_sparse_full(size: Size = FULL, repeats: int = 3, cases=None) -> list:
    """`two_layer_cases` (or those of them in `cases`) at `size`: the papers' T=100, B=256
    where `exp_sparse` runs every case at once only at the --quick settings (the 5-layer and
    the 2,944-neuron cases do not fit this machine's time at FULL)."""
    names = two_layer_cases(size)
    unknown = sorted(set(cases or ()) - set(names))
    if unknown:
        raise SystemExit(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    rows = exp_sparse(size, repeats, only=set(cases or names))
    for r in rows:
        r["experiment"] = "sparse_full"
    return rows


def exp_sparse_width(
    hiddens=(200, 500, 1000), b_th=0.2, size: Size = QUICK, repeats=3, pretrain_steps=30
):
    """Perez-Nieves & Goodman's Fig. 4C here: dense against window(b_th) as both hidden
    layers widen; speed, activity, gradient error and trace memory (no accuracy runs)."""
    task = latency_task(size.image_dataset, size.steps)
    rows = []
    for h in hiddens:
        case = SparseCase(
            f"width-h{h}",
            task,
            h,
            size.steps,
            size.batch,
            rules=(sparse.window(b_th),),
            pretrain_steps=pretrain_steps,
            paper="Perez-Nieves & Goodman",
        )
        for r in run_case(case, repeats):
            r["experiment"] = "sparse_width"
            r.setdefault("weights", "initialisation")
            rows.append(r)
    return rows
