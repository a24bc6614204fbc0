"""A tiny PPO run for test_resume.py: ``python resume_run.py OUT_DIR STEPS [SLEEP_S]`` (resumes from
OUT_DIR's newest checkpoint). SLEEP_S slows each batch so the test can kill the run mid-way."""

from __future__ import annotations

import sys
import time

from rl_fixtures import tiny_models, tiny_source

from research import rl


def main() -> None:
    out, steps = sys.argv[1], int(sys.argv[2])
    sleep = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    source = tiny_source()

    def slow(cursor):
        time.sleep(sleep)
        return source(cursor)

    opt = rl.OptimConfig(lr=1e-3)
    # 2 mini-batches x 2 epochs: the RNG (shuffling) is part of what must resume exactly.
    cfg = rl.LearnerConfig(actor=opt, critic=opt, minibatches=2, epochs=2)
    learner = rl.Learner(cfg, *tiny_models(seed=0))
    rl.train(learner, slow, rl.RunConfig(out_dir=out, steps=steps, save_every=2, progress=False))


if __name__ == "__main__":
    main()
