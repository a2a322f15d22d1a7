"""Coquelin et al. 2022 (DASO): accuracy against SSGD and SSGD+fp16 (Horovod) with a node-local
tier (4 ranks as 2 nodes x 2), section 4.1 (Figures 6 and 7); the traffic between nodes is
reported (the paper gives no number for it); the training time only where the regime allows."""

import numpy as np

from refsgd.reproduce.measure import Claim, acc, curve, epochs, eval_every, run_seconds, scale_speedups
from refsgd.reproduce.verdict import MODEL, PAPER, near

RANKS, G = 4, 2  # 2 (virtual) nodes of 2 ranks: DASO's node-local tier exists (with G = 1 it is empty)

TIME_TEXT = ("section 4.1 (Figure 6)", "ResNet-50, ImageNet-2012, 4-64 nodes of 4 A100 GPUs",
             "Results of the experiment are shown in Figure 6. Both DASO and Horovod show desirable strong scaling "
             "behavior, i.e. a factor of two in GPU number results in the training time being halved. Due to DASO's "
             "optimized hierarchical communication scheme and the reduced number of synchronizations, DASO requires "
             "up to 25% less time for training compared to Horovod.")
ACC_TEXT = ("section 4.1 (Figure 7)", "ResNet-50, ImageNet-2012",
            "It can further be observed that up to 128 GPUs, DASO and Horovod yield similar levels of accuracy, see "
            "Figure 7. However, with more than 128 GPUs, both approaches did not exceed 75% top-1 accuracy. [...] For "
            "DASO, the effect is more dramatic because completing batches without a global synchronization has a "
            "similar effect to increasing the size of the batch.")
CITY_TEXT = ("section 4.2 (Figure 8)", "hierarchical multi-scale attention network, CityScapes",
             "For up to 128 GPUs, DASO completed the training process in approximately 35% less time than Horovod, "
             "demonstrating the advantage of our approach to fully leverage the systems communication architecture "
             "together with asynchronous parameter updates. At higher GPU counts the time savings drop to 30%, "
             "because there are fewer batches per epoch and hence skipping global synchronization operations "
             "provides less benefits.")
SETUP_TEXT = ("section 4", "JUWELS Booster",
              "This centers' HPC cluster has 936 GPU nodes each with two AMD EPYC Rome CPUs and four NVIDIA A100 "
              "GPUs, connected via an NVIDIA Mellanox HDR InfiniBand interconnect fabric. [...] With respect to "
              "message packaging, Horovod was configured to use floating point 16 compression while DASO compresses "
              "to brain floating point 16. [...] DASO's maximum number of batches between global synchronizations "
              "was set to four for both experiments.")


def _hyper(setup):
    return {"model": setup.model("accuracy"), "batch": 32, "epochs": epochs(setup, (1, 3), (1, 3)), "lr": 0.05,
            "momentum": 0.9, "weight_decay": 1e-4, "schedule": "constant", "ranks_per_node": G,
            # most of the run cycling (non-blocking global syncs), as the paper's 90 epochs: no blocking warm-up
            # epoch (every rank starts from the same weights), the last epoch blocking (the paper's cool-down)
            "warmup_epochs": 0,
            "cooldown_epochs": 1, "sync_every": 4,
            "note": f"{RANKS} ranks as {RANKS // G} (virtual) nodes of {G}, no emulated link (accuracy and "
                    "traffic do not depend on it); B = 4 batches between global syncs, as the paper"}


def _measure(runs, setup, hp, seed):
    common = dict(model=hp["model"], batch=hp["batch"], epochs=hp["epochs"], lr=hp["lr"], momentum=hp["momentum"],
                  weight_decay=hp["weight_decay"], schedule=hp["schedule"],
                  eval_every=eval_every(setup, hp["batch"], RANKS, per_epoch=2))
    r = {"ssgd": runs.train("ssgd", seed, ranks=RANKS, **common),
         "ssgd+fp16": runs.train("ssgd", seed, ranks=RANKS, compress="fp16", **common),
         "daso": runs.train("daso", seed, ranks=RANKS, ranks_per_node=hp["ranks_per_node"],
                            warmup_epochs=hp["warmup_epochs"], cooldown_epochs=hp["cooldown_epochs"],
                            sync_every=hp["sync_every"], **common)}
    secs = {k: run_seconds(v) for k, v in r.items()}
    gb = {k: float(np.asarray(v.rec["global_bytes"]).sum(axis=1).mean()) if "global_bytes" in v.rec else float("nan")
          for k, v in r.items()}
    n = {"acc_ssgd": acc(r["ssgd"]), "acc_fp16": acc(r["ssgd+fp16"]), "acc_daso": acc(r["daso"]),
         "seconds_ssgd": secs["ssgd"], "seconds_fp16": secs["ssgd+fp16"], "seconds_daso": secs["daso"],
         "global_mb_ssgd": gb["ssgd"] / 1e6, "global_mb_fp16": gb["ssgd+fp16"] / 1e6,
         "global_mb_daso": gb["daso"] / 1e6, "ranks_per_node": float(hp["ranks_per_node"])}
    n["daso_minus_ssgd_acc"] = n["acc_daso"] - n["acc_ssgd"]
    n["daso_minus_fp16_acc"] = n["acc_daso"] - n["acc_fp16"]
    n["time_saved_vs_fp16_pct"] = 100 * (1 - secs["daso"] / secs["ssgd+fp16"])
    n["traffic_ratio_vs_fp16"] = gb["ssgd+fp16"] / max(gb["daso"], 1.0)
    n.update(_traffic_numbers(None, hp, n))
    return n, {"test accuracy (%) against epochs": {k: curve(v) for k, v in r.items()}}


def design_traffic(hp):
    """SSGD+fp16's bytes between nodes over DASO's, by DASO's design (the listing, L5 and L9), in
    the code's count (each rank's bytes put into a global collective, whatever the group's size):
    per batch, SSGD+fp16 puts 2 bytes a parameter into its all-reduce on every rank; DASO's blocking
    phases (warm-up, cool-down) put 2 (bf16) on one rank of G, its cycling phase 4 (float32) on one
    rank of G every B batches. So DASO cuts the traffic by G, and by B / 2 more while it cycles."""
    blocking = (hp["warmup_epochs"] + hp["cooldown_epochs"]) / hp["epochs"]
    g, b = hp["ranks_per_node"], hp["sync_every"]
    return 2 / (blocking * 2 / g + (1 - blocking) * 4 / (g * b))


def _traffic_numbers(series, hp, numbers):
    """The design's ratio at the run's own G, B and phases, the measured one over it, and the share
    of the run cycling: from the hyperparameters and the measured bytes alone (so --rejudge fills
    them for an earlier result)."""
    if not {"warmup_epochs", "cooldown_epochs", "epochs", "ranks_per_node", "sync_every"} <= set(hp):
        return {}  # a result written before DASO's phases were hyperparameters: its checks are not measured
    # the share of the run in the cycling phase (non-blocking global syncs): the rest is synchronous SGD
    out = {"cycling_share": (hp["epochs"] - hp["warmup_epochs"] - hp["cooldown_epochs"]) / hp["epochs"]}
    if "traffic_ratio_vs_fp16" in numbers:  # (a result written before the bytes were counted has none)
        design = design_traffic(hp)
        out.update(traffic_design_vs_fp16=design, traffic_over_design=numbers["traffic_ratio_vs_fp16"] / design)
    return out


#: the claim's regime: 2 of 3 epochs cycling, G = 2, B = 4 (a cut of 3x against SSGD+fp16)
TRAFFIC_NULL = 1 / design_traffic({"warmup_epochs": 0, "cooldown_epochs": 1, "epochs": 3, "ranks_per_node": G,
                                   "sync_every": 4})
#: the paper's JUWELS runs: G = 4 GPUs a node, B = 4 (B_max), cycling from a blocking warm-up to a cool-down
PAPER_G, PAPER_B = 4, 4


def _scale(setup, hp, numbers):
    return scale_speedups(hp["model"], hp["batch"], 128, ("daso",), G=4,
                          paper={"daso": "1.33-1.54 (25-35 % less time than Horovod, up to 128 GPUs)"})


CLAIMS = [
    Claim("daso", "Coquelin et al. 2022 (DASO)", "section 4.1 (Figures 6 and 7)",
          "DASO keeps Horovod's (SSGD+fp16's) accuracy up to 128 GPUs and takes up to 25-35 % less time.",
          "similar accuracy up to 128 GPUs; up to 25 % (ResNet-50) and about 35 % (CityScapes) less training time "
          "than Horovod; no number for the traffic",
          (near("daso_minus_fp16_acc", 0.0, 0.5, "DASO minus SSGD+fp16 final test accuracy (pp)",
                "the paper's \"similar levels of accuracy\" (Figure 7), +-0.5 pp (the seeds' spread of the committed "
                "runs, 0.53 pp; 50 of MNIST's 10,000 test images): an equivalence", partial_tol=1.5, kind=PAPER,
                null=0.0, needs=("cycling_share", 0.5, 1.0),
                needs_why="DASO cycling (non-blocking global syncs) for most of the run, as the paper's 90 epochs "
                          "after a 5-epoch warm-up: a run mostly in warm-up and cool-down is synchronous SGD"),
           near("time_saved_vs_fp16_pct", 30.0, 5.0, "training time saved against SSGD+fp16 (%)",
                "the paper's 25 % (ResNet-50) to 35 % (CityScapes): its own spread", timing=True, kind=PAPER,
                null=0.0),
           near("traffic_over_design", 1.0, 0.02, "SSGD+fp16's bytes between nodes over DASO's, measured (the "
                "code's own count, metrics global_bytes) over the design's at the run's G, B and phases",
                "the design of section 3 (a cut by G, and by B / 2 more while cycling: daso.design_traffic), +-2 % "
                "(an epoch's batches not a multiple of B); the null, DASO sending as much as SSGD+fp16, is "
                f"{TRAFFIC_NULL:.3g} at this claim's regime", kind=MODEL, null=TRAFFIC_NULL)),
          _hyper, _measure, "curves", quotes=(TIME_TEXT, ACC_TEXT, CITY_TEXT, SETUP_TEXT),
          regime=f"MNIST, MNIST-MLP, {RANKS} ranks as {RANKS // G} nodes x {G} (DASO's node-local tier), "
                 "B = 4 as the paper, 2 epochs of 3 cycling (no blocking warm-up epoch, a blocking cool-down epoch: "
                 "the paper's runs cycle for most of their 90 epochs; results before issue 42 cycled 1 of 3, where "
                 "the accuracy check is not testable); the training time is not testable here (4 ranks on 2 "
                 "cores: time-slicing)",
          ours="the bands; the traffic between nodes (MB per rank) is checked against DASO's design (the paper "
               "gives no number for it: model conformance)",
          paper_values={"time_saved_vs_fp16_pct": "25-35"},
          at_scale="the paper runs 4 GPUs per node on up to 64 nodes; here virtual nodes on one machine",
          scale=_scale,
          tuning="shared, as the paper (\"settings of the scheduler, as well as for the local optimizer settings, "
                 "were set to be identical for both DASO and Horovod\"); the paper's loss-plateau schedule is "
                 "a constant rate here (the runs are too short to plateau)",
          data="mnist", axes=("epochs", "test accuracy (%)"), budget=(30, 55), from_series=_traffic_numbers,
          untested=(("the traffic between nodes (section 3: the node-local tier and the syncs every B batches; the "
                     "paper gives no number)", "model conformance: traffic_over_design, the code's count against "
                     "the design's, judged above",
                     f"while cycling, at the paper's G = {PAPER_G} GPUs a node and B = {PAPER_B}: "
                     f"{PAPER_G * PAPER_B / 2:g}x less than Horovod's fp16 (design_traffic; B halves at each "
                     f"plateau: at B = 1, {PAPER_G / 2:g}x less), in the blocking phases {PAPER_G:g}x less"),
                    ("\"with more than 128 GPUs, both approaches did not exceed 75% top-1 accuracy [...] For DASO, "
                     "the effect is more dramatic\" (Figure 7)",
                     "not testable here: the loss comes from the global batch that 256 GPUs of ResNet-50 on "
                     "ImageNet make (the paper's own reason); 4 ranks on MNIST have neither the batch nor the data "
                     "that shows a large-batch loss", ""))),
]
