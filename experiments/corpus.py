"""The cold-start corpus of agent transcripts (issue #32, docs/text_policy.md), and optionally the study's
text policy built on it (its tokenizer trained on the transcripts as the chat template renders them).

    python -m experiments.corpus data_dir=outputs/datasets/ops out_dir=outputs/corpus sandbox=gpu
    python -m experiments.corpus data_dir=D out_dir=O text_policy.build=true     # + O/text_policy/
    python -m experiments.corpus data_dir=D out_dir=O protocol=P.json            # its train tasks only

Writes O/trajectories.jsonl (sft.demos=O), O/report.json and O/run/; resumes.
"""

from __future__ import annotations

import json
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from experiments._command_line import command_line_checked
from experiments._hydra import CONF, to_dataclass, user_errors
from experiments._schemas import register
from kernels_env.client import JudgeConfig, SandboxConfig
from research.data.transcripts import CorpusConfig, CorpusError
from research.textpolicy import TextPolicySpec

CONFIG_NAME = "corpus"
register(CONFIG_NAME)  # each group's dataclass as its schema (experiments._schemas)


def to_config(cfg: DictConfig) -> tuple[CorpusConfig, SandboxConfig, TextPolicySpec | None]:
    node = OmegaConf.to_container(cfg, resolve=True)
    judge = to_dataclass(JudgeConfig, node["judge"], where="judge")
    corpus = to_dataclass(CorpusConfig, {**node["corpus"], "judge": judge}, where="corpus")
    sandbox = to_dataclass(SandboxConfig, node["sandbox"], where="sandbox")
    spec = dict(node["text_policy"])
    build = spec.pop("build")
    return corpus, sandbox, to_dataclass(TextPolicySpec, spec, where="text_policy") if build else None


@command_line_checked(CONFIG_NAME)
@hydra.main(config_path=CONF, config_name=CONFIG_NAME, version_base="1.3")
def main(cfg: DictConfig) -> None:
    from kernels_env.client import SandboxClient
    from research.data import load_synthesized
    from research.data.transcripts import generate_corpus
    from research.evaluation import ProtocolError, load_protocol, split_tasks
    from research.textpolicy import build_checkpoint

    with user_errors(cfg, CorpusError, ProtocolError, dirs={"data_dir": None}, paths=["protocol"]):
        corpus, sandbox, spec = to_config(cfg)
        tasks = load_synthesized(cfg.data_dir)
        if cfg.protocol:  # the study's corpus: its protocol's train tasks only (nothing of dev or the tests)
            tasks = split_tasks(load_protocol(cfg.protocol), tasks)["train"]
        with SandboxClient(sandbox, corpus.judge) as client:
            report = generate_corpus(tasks, corpus, cfg.out_dir, client)
        print(
            f"{report['kept']} transcripts kept of {report['episodes']} episodes "
            f"({report['tasks_covered']} of {report['tasks_given']} tasks covered) in {cfg.out_dir}"
        )
        if spec is not None:
            out = Path(cfg.out_dir)
            built = build_checkpoint(out / "text_policy", spec, demos=[out / "trajectories.jsonl"])
            print(json.dumps({k: v for k, v in built.__dict__.items() if k != "spec"}))


if __name__ == "__main__":
    main()
