"""How much memory a simulation will take, estimated before it is built.

The estimate is what ``simulate``, ``launch`` and ``experiment`` check against the machine's free
memory, so that a run that cannot fit is refused in one line instead of being OOM-killed halfway
(or taking the machine down). It counts what a run holds at its largest: every node's model with
its optimizer's state and its delta base, what every CIA observer keeps of each user it hears
from, and for FedAvg the round's updates in flight. Figures it was checked against are in
:func:`run_bytes` and :func:`launch_bytes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from p2pnode.config import ConfigError, RunConfig
from p2pnode.nodes.prepare import Prepared

BASE_BYTES = 450 << 20  #: the interpreter, torch, numba's kernels, the dataset
#: per node beyond its model, moments and bases: its data (an item mask), protocol, sampler and
#: wire state; measured at 1,083 Foursquare-shaped nodes (RSS after the build less the floor)
NODE_BYTES = 200 << 10


#: distinct new users a gossip observer hears from a round, per source of models it reads (itself,
#: each forwarding partner): measured 0.50-0.53 on Foursquare-shaped nodes (1,083 over 26 rounds,
#: 300 over 100), with a margin; the 400-round Table III run peaks at 18.1 GiB, estimated 19.3
SENDER_RATE = 0.55

#: model copies a node's learner holds, by model (learning/learner.py: Adam; prme_learner.py: SGD)
STATE_COPIES = {"gmf": 3, "prme": 1, "ncf": 3}

#: FedAvg at full POI size peaked above the sum of its parts: Table II on the Gowalla shape 13.8 GiB
#: for GMF with e_A at the server against 11.8 (one seed a process), 16.5 for PRME against 16.4, on
#: the Foursquare shape at least 21.1 for GMF against 20.4 (ended there by a 21.5 GiB cap in round
#: 2), 18.2 against 18.0 before the shared tables; at 150-400 clients the parts are 0.5-6% above
#: the peak (e_A adds nothing there: 2.79 against 2.78 GiB). The growth is glibc's heap
#: fragmenting (process.set_mmap_threshold): with the mmap threshold fixed at 1 MiB the
#: Gowalla GMF run with e_A peaks at 11.81 GiB against parts of 11.84 (``python -m bench.fedavg_memory --data
#: FILE --clients 718 --fictive-user --mmap-threshold-mib 0,1``: 13.81 GiB without). So the parts
#: of a FedAvg run are counted 17% higher under glibc's own threshold, the largest gap measured,
#: and 3% higher with a fixed one (``sim.mmap_threshold_mib``)
FEDAVG_MARGIN = 1.17
FEDAVG_MARGIN_FIXED_MMAP = 1.03


@dataclass(frozen=True)
class Footprint:
    """What a run's memory is estimated from (:func:`footprint_of` measures a run)."""

    model_bytes: int  #: one node's model
    adversaries: int = 0  #: CIA observers (colluders that only forward keep none)
    observer_bytes: int = 0  #: what an observer keeps per user heard from, on average (v_u; doubled by MIA)
    #: distinct users an observer hears from a round: (1 + partners) x SENDER_RATE in gossip, every
    #: selected client at the FedAvg server
    heard_per_round: float = 1.0
    #: models of a round held at once beyond the nodes' own: FedAvg's updates, each in flight as a
    #: frame until the server takes it (the client keeps no snapshot of it; 0 for gossip)
    in_flight: int = 0
    #: copies of the model a node's learner holds: GMF's parameters and Adam's two moments (3);
    #: PRME trains with plain SGD and holds its parameters alone (1)
    copies: int = 3
    #: bytes of the item tables the simulator's FedAvg clients share instead of holding one each
    #: (learning/workbench.py), and how many clients share them (the honest ones)
    workbench_bytes: int = 0
    workbench_clients: int = 0
    #: what a node holds beside its model (:func:`pard_node_bytes`): PARD's estimators and D_pub
    extra_node_bytes: int = 0


def run_bytes(config: RunConfig, fp: Footprint) -> int:
    """The memory one simulation of ``config`` is expected to take at its largest.

    Per node: the model and, for GMF, Adam's two moments for it (the float32 floor; PRME's SGD
    keeps none), and the sender's delta base, which saves at most the delta budget of changed rows
    (learning/history.py; in one process receivers share it). Per observer: v_u of every user it
    heard from, which grows with the rounds up to every user (adversary/cia.py): ``SENDER_RATE``
    new users a round per source in gossip (measured). FedAvg's server hears from every selected
    client each round, so it keeps a v_u of every user (with every user's items as targets: a
    whole item table each), and the round's updates are held once while in flight (every client
    trains and sends before the server takes the first; it adds each to its sum as it reads it).

    Measured against it (peak RSS / estimate, GiB): 1,083 Foursquare-shaped gossip nodes, every
    one an adversary, 26 rounds (``python -m bench.scale --shape foursquare-nyc``): 15.72 / 16.5;
    the same over Table III's 400 rounds: 18.1 / 19.3; 718 Gowalla-shaped ones, 400 rounds, two
    seeds in one process: 11.0 / 12.0; 100 Foursquare-shaped PRME nodes of 18.4 MB: 2.17 / 2.25;
    200 Gowalla-shaped FedAvg clients (``python -m bench.fedavg_memory --clients 200``): 3.56 /
    4.15 (5.18 / 5.33 before they shared their tables and held their updates once); 150
    Foursquare-shaped ones: 3.17 / 3.68; 150 Gowalla-shaped PRME ones (15.8 MB models): 3.83 /
    4.35 (8.35 before); Table II on the Gowalla shape, 718 clients, one seed: GMF with e_A 13.8 /
    13.8, PRME 16.5 / 19.1; its GMF row on the Foursquare shape, 1,083 clients: above 21.1 /
    23.8 (a 21.5 GiB cap ended it in round 2).
    """
    model = fp.model_bytes
    delta = min(0.9 * model, config.wire.delta_budget_bytes) if config.wire.delta else 0.0
    per_node = fp.copies * model + delta + NODE_BYTES + fp.extra_node_bytes
    heard = min(max(config.nodes - 1, 0), math.ceil(config.rounds * fp.heard_per_round))
    attack = fp.adversaries * heard * fp.observer_bytes
    # frames kept in a spill folder wait as page cache the kernel can write out (transport/spill.py)
    in_flight = 0 if config.sim.spill_dir else fp.in_flight * model
    parts = config.nodes * per_node + attack + in_flight
    if fp.workbench_bytes:  # one copy of the tables in place of one a client, whose delta base
        # closes when it gives the tables up (learning/workbench.py)
        parts -= fp.workbench_clients * (fp.workbench_bytes + delta) - fp.workbench_bytes
    return int(BASE_BYTES + parts * _margin(config, fp))


def _margin(config: RunConfig, fp: Footprint) -> float:
    """How much higher a run's parts are counted: FedAvg's heap fragmentation, less where the mmap
    threshold is fixed (:data:`FEDAVG_MARGIN`)."""
    if not fp.in_flight:
        return 1.0
    return FEDAVG_MARGIN_FIXED_MMAP if config.sim.mmap_threshold_mib else FEDAVG_MARGIN


def available_bytes(
    meminfo: Path = Path("/proc/meminfo"),
    cgroup: Path = Path("/proc/self/cgroup"),
    sysfs: Path = Path("/sys/fs/cgroup"),
) -> int | None:
    """The memory a run started from this process can take: the machine's ``MemAvailable``, or
    less where this process's memory cgroup (a container, a systemd slice) has a limit with less
    room left under it (None where neither can be read)."""
    free = _meminfo_available(meminfo)
    room = cgroup_room(cgroup, sysfs)
    if room is None:
        return free
    return room if free is None else min(free, room)


def _meminfo_available(meminfo: Path) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def cgroup_room(cgroup: Path = Path("/proc/self/cgroup"), sysfs: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Bytes left under the memory limit of this process's cgroup (v2 ``memory.max``, or v1
    ``memory.limit_in_bytes``), counting reclaimable page cache (``inactive_file``) as room; None
    where the process is in no limited memory cgroup or the files cannot be read."""
    try:
        lines = cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # v2: one unified hierarchy
            files = ("memory.max", "memory.current", "inactive_file")
            folder = sysfs / path.lstrip("/")
        elif "memory" in controllers.split(","):  # v1: the memory controller's own hierarchy
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
            folder = sysfs / "memory" / path.lstrip("/")
        else:
            continue
        try:
            limit_text = (folder / files[0]).read_text().strip()
            if limit_text == "max":
                continue
            limit, usage = int(limit_text), int((folder / files[1]).read_text())
            stat = dict(ln.split() for ln in (folder / "memory.stat").read_text().splitlines() if " " in ln)
            cache = int(stat.get(files[2], 0))
        except (OSError, ValueError):
            continue
        if limit >= 1 << 60:  # v1's "no limit" is a huge page-rounded number
            continue
        return max(limit - usage + cache, 0)
    return None


def footprint_of(config: RunConfig, prep: Prepared) -> Footprint:
    """What one run of ``config`` holds per node and per observer: its model's size, and its
    adversaries with what each keeps of a user (:func:`run_bytes` turns it into bytes)."""
    from adversary.cia import kept_rows
    from adversary.models import attack_model
    from p2pnode.attacks.attack import plan_for
    from p2pnode.runners.build import workbench_names

    model = prep.model_bytes
    plan = plan_for(prep)
    fed = max(1, math.ceil(config.fraction * config.nodes)) if config.protocol == "fedavg" else 0
    copies = STATE_COPIES[config.model]
    bench = sum(prep.init[k].nbytes for k in workbench_names(config))
    clients = config.nodes if bench else 0
    extra = pard_node_bytes(prep) + eval_node_bytes(prep) + knn_node_bytes(prep)
    if plan is None:
        return Footprint(
            model,
            in_flight=fed,
            copies=copies,
            workbench_bytes=bench,
            workbench_clients=clients,
            extra_node_bytes=extra,
        )
    clients -= sum(1 for a in plan.adversaries if a < config.nodes) if bench else 0
    observers = [s for s in plan.adversaries.values() if not s.forwarder]
    rows = sum(kept_rows(s.targets).size for s in observers) // max(len(observers), 1)  # their mean
    # what an observer keeps of a model (adversary/models.py, AttackModel.keep): the target rows of
    # the attack's item tables, and every other tensor it does not drop whole (PRME's sequential
    # table is dropped: counting it doubled a PRME observer's estimate, 50.9 kB a user against
    # 25.4 measured by ``python -m bench.cia_memory``)
    attack = attack_model(config.model)
    per_row = sum(v.nbytes // v.shape[0] for name, v in prep.init.items() if name in attack.item_tables)
    whole = (v.nbytes for name, v in prep.init.items() if name not in (*attack.item_tables, *attack.dropped))
    kept = rows * per_row + sum(whole) + 256  # 256: the arrays' headers
    if config.attack.mia_proxy:  # the latest observation of each user too
        kept *= 2
    partners = max((len(s.partners) for s in observers), default=0)
    heard = fed or (1 + partners) * SENDER_RATE  # the FedAvg server: every selected client a round
    return Footprint(model, len(observers), kept, heard, fed, copies, bench, clients, extra)


def eval_node_bytes(prep: Prepared) -> int:
    """What ``--eval full`` adds to a node: its candidates, every item it never touched (int64),
    where the sampled protocol keeps 101 (0 then)."""
    if prep.config.learning.evaluation != "full":
        return 0
    n_items = max(int(v.shape[0]) for v in prep.init.values())
    return 8 * n_items


#: what a KNN node keeps of each profile it holds beyond its items (4 bytes each in the index):
#: its similarity, co-rated count, and, as the neighbour it probed, the querier's entry (hash and
#: time), with the heap's share. Fitted to ``python -m p2plab simulate --nodes 943 --rounds 5
#: --knn gain``: peak RSS 2.40-2.48 GB against 1.14 GB without --knn.
KNN_PAIR_BYTES = 1000


def knn_node_bytes(prep: Prepared) -> int:
    """What the KNN service (``--knn``) adds to a node: per profile it holds (every other node's
    with ``--knn-candidates full``; with ``view`` at most 2,000) its index entries and
    :data:`KNN_PAIR_BYTES`. At ML-100k's shape, 943 nodes, full: 1.26 MB."""
    cfg = prep.config
    if not cfg.knn.active or prep.data is None:
        return 0
    held = cfg.nodes - 1 if cfg.knn.candidates == "full" else min(cfg.nodes - 1, 2000)
    mean_items = len(prep.data) / max(prep.data.n_users, 1)
    return int(held * (4 * mean_items + KNN_PAIR_BYTES))


def pard_node_bytes(prep: Prepared) -> int:
    """What a PARD node holds beside its model (0 without PARD): its estimators' weights and
    momentum (learning/pard.py: per attribute an MLP on 2d values and one on d, and a d-wide
    embedding per class) and its own copy of D_pub (a row of 3d float32 values and the classes
    per public user). At ML-100k's shape (d 64, classes 3, 2, 21; 189 public users): 1.4 MB."""
    from p2pnode.runners.build import public_spec

    spec = public_spec(prep)
    if spec is None:
        return 0
    d, classes = spec.dim, spec.classes
    weights = 0
    for width in (2 * d, d):
        half = max(1, width // 2)
        per = 2 * (width * width + width) + width * half + half + (half + 1) * max(classes)
        weights += per * len(classes)
    weights += sum(classes) * d
    public = spec.max_rows * (3 * d * 4 + len(classes) * 8)
    return 2 * weights * 4 + public


def launch_bytes(config: RunConfig, fp: Footprint, processes: int) -> int:
    """The memory of ``config`` run as ``processes`` local processes (``p2pnode launch``): the
    simulator's estimate, plus one interpreter and its libraries per further process, plus the
    senders' models each receiver keeps as delta bases (over HTTP they are copies, not the
    sender's own base; ``wire.bases``: one for a POI model), plus the bodies a process's server
    may be reading at once (``Limits.max_inflight`` frames of a whole model). Measured: 200
    Foursquare-shaped nodes (4.9 MB models, every one an adversary) in 2 processes peak at 4.97
    GiB together; estimated 5.5."""
    from p2pnode.nodes.host import body_limit
    from p2pnode.trust.limits import Limits

    bases = config.wire.bases(fp.model_bytes) if config.wire.delta else 0
    per_process = (processes - 1) * BASE_BYTES + processes * Limits().max_inflight * body_limit(
        fp.model_bytes
    )
    # real processes keep a client's tables each: the simulator's workbench is not theirs
    own = replace(fp, workbench_bytes=0, workbench_clients=0)
    return run_bytes(config, own) + per_process + config.nodes * bases * fp.model_bytes


def check_fits(config: RunConfig, prep: Prepared, processes: int = 0) -> None:
    """Refuse a run whose estimate is above this machine's free memory (ConfigError): in the
    simulator (``processes`` 0), or as that many local processes."""
    fp = footprint_of(config, prep)
    need = launch_bytes(config, fp, processes) if processes else run_bytes(config, fp)
    free = available_bytes()
    if free is not None and need > free:
        said = too_big(config, need, free, processes)
        if not processes and fp.in_flight:
            said += _fedavg_hint(config, fp, free)
        raise ConfigError(said)


def _fedavg_hint(config: RunConfig, fp: Footprint, free: int) -> str:
    """What makes a FedAvg simulation fit that does not: the allocator's threshold (its heap's
    fragmentation is what does not fit), else a spill folder for the round's updates on their way;
    "" where neither does."""
    if not config.sim.mmap_threshold_mib:
        fixed = run_bytes(config.replace(**{"sim.mmap_threshold_mib": 1.0}), fp)
        if fixed <= free:
            return (
                f"; with --mmap-threshold-mib 1 (glibc's heap kept from fragmenting: the same "
                f"numbers, up to 2x the time) it needs about {fixed / 2**30:.1f} GiB, which fits"
            )
    if not config.sim.spill_dir:
        spilled = run_bytes(config.replace(**{"sim.spill_dir": "DIR"}), fp)
        if spilled <= free:
            return (
                f"; with --spill-dir DIR (a round's updates wait for the server in files there, as "
                f"page cache: the same numbers, more time) it needs about {spilled / 2**30:.1f} GiB, "
                "which fits"
            )
    return ""


def too_big(config: RunConfig, need: int, free: int, processes: int = 0) -> str:
    """The one line that refuses a run that does not fit."""
    data = Path(str(config.dataset)).name
    where = f" in {processes} processes" if processes > 1 else ""
    fewer = "fewer --processes, fewer --nodes" if processes > 1 else "fewer --nodes"
    return (
        f"a run of {config.nodes} nodes ({config.protocol}, {data}){where} needs about "
        f"{need / 2**30:.1f} GiB and {free / 2**30:.1f} GiB is free; run {fewer} or on a machine "
        "with more memory"
    )
