"""Benchmarks of the toy environment (``research.toyenv``): what its plan settings are worth when judged on a
GPU (``toy_plan_speeds``; its speeds ship as ``research/toyenv/assets``) and what grammar-aware smoothing does
to the pretrained toy policy (``toy_pretrain_smoothing``)."""
