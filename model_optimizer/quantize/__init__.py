"""Weight quantization with llm-compressor, run in its own environment (`mopt quantize`).

``model_optimizer.plan.quant_schemes`` lists the schemes and where vLLM serves each
(measured); ``calibration`` draws the samples, ``worker`` is the subprocess (no mopt
imports), ``run`` drives it, pins the checkpoint and writes the recipe revision.
"""
