"""Peak dense (no sparsity) tensor-core FLOP/s per GPU model and dtype, the MFU denominator.

Figures are the vendor's datasheet numbers; NVIDIA quotes most of them "with sparsity", which
is twice the dense figure used here (MFU is always measured against dense peak).
"""

from __future__ import annotations

TERA = 1e12

PEAK_DENSE_FLOPS: dict[str, dict[str, float]] = {
    # NVIDIA A100 datasheet (SXM4 and PCIe, 40/80 GB): BF16/FP16 312 TFLOPS, TF32 156 TFLOPS.
    "A100": {"bf16": 312 * TERA, "fp16": 312 * TERA, "tf32": 156 * TERA},
    # NVIDIA H100 datasheet, SXM: BF16/FP16 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity,
    # TF32 989 TFLOPS with sparsity; dense is half.
    "H100-SXM": {
        "bf16": 989.4 * TERA,
        "fp16": 989.4 * TERA,
        "fp8": 1978.9 * TERA,
        "tf32": 494.7 * TERA,
    },
    # NVIDIA H100 datasheet, PCIe: BF16/FP16 1,513, FP8 3,026, TF32 756 TFLOPS with sparsity.
    "H100-PCIe": {
        "bf16": 756.5 * TERA,
        "fp16": 756.5 * TERA,
        "fp8": 1513 * TERA,
        "tf32": 378 * TERA,
    },
    # NVIDIA H200 datasheet, SXM: same tensor cores as H100 SXM (1,979 BF16 with sparsity).
    "H200": {
        "bf16": 989.4 * TERA,
        "fp16": 989.4 * TERA,
        "fp8": 1978.9 * TERA,
        "tf32": 494.7 * TERA,
    },
    # NVIDIA HGX B200 datasheet: 8 GPUs give 36 PFLOPS BF16/FP16, 72 PFLOPS FP8 and 18 PFLOPS
    # TF32, all with sparsity; per GPU dense: 2.25 PF BF16, 4.5 PF FP8, 1.125 PF TF32.
    "B200": {"bf16": 2250 * TERA, "fp16": 2250 * TERA, "fp8": 4500 * TERA, "tf32": 1125 * TERA},
    # NVIDIA L40S datasheet: BF16/FP16 733, FP8 1,466, TF32 366 TFLOPS with sparsity.
    "L40S": {"bf16": 362.05 * TERA, "fp16": 362.05 * TERA, "fp8": 733 * TERA, "tf32": 183 * TERA},
}

DTYPES = ("bf16", "fp16", "fp8", "tf32")


def peak_flops(model: str, dtype: str) -> float:
    """Peak dense FLOP/s of one GPU; KeyError when the table has no figure."""
    return PEAK_DENSE_FLOPS[model][dtype]


def model_of_board_name(name: str) -> str | None:
    """The table's model for a board as nvidia-smi and NVML name it ("NVIDIA A100-SXM4-80GB",
    "NVIDIA H100 80GB HBM3", "H100 PCIe"), or None: what a spec's error suggests when someone
    pasted that name. Variants whose figures differ (H100 NVL, GH200) are not guessed."""
    words = name.upper().replace("NVIDIA", " ").replace("-", " ").split()
    if "NVL" in words or any(word.startswith("GH") for word in words):
        return None
    if "H100" in words:
        return "H100-PCIe" if "PCIE" in words else "H100-SXM"
    # The table's one-word models (every model but H100's two) match a word of the name.
    return next((model for model in PEAK_DENSE_FLOPS if model.upper() in words), None)
