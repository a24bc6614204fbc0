"""Benchmarks of RL training steps end to end (``research.rl``, ``research.agent``): a step's time split into
generate, judge and learn (``rl_step``, ``agent_rl_step``), the agent loop's costs (``agent_loop``) and the
latency of every agent tool as the agent calls it (``agent_tools``)."""
