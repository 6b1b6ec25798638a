# Job resources from the model table (MODELS, common.smk): memory and wall time of the per-model
# jobs grow with params_b and the bytes per weight. A local run uses only `gpu` (a counter:
# --resources gpu=N) and threads; on SLURM (profiles/slurm) mem_mb, runtime and gpu become
# sbatch --mem, --time and --gpus. Every function reads one model's row only, so adding a model
# to the table changes no other model's jobs. A retried job (--retries, profiles/slurm) gets
# twice the memory and time. Override any value with --set-resources.
import math

#: bytes per weight as loaded for scoring; `auto` is float32 wherever the model fits the GPU (bfloat16 only
#: where it must: qclm.models.loading.choose_auto_dtype), so host memory is sized for float32
WEIGHT_BYTES = {"auto": 4, "bfloat16": 2, "float16": 2, "float32": 4}
QUANTIZED_WEIGHT_BYTES = {"8bit": 1, "4bit": 0.5}
JOB_BASE_MB = 4096  # interpreter, torch, tokenizer, result tables


def weights_mb(name):
    """Size of one model's weights in MB as loaded for scoring (dtype or quantization column); none in the job's
    host memory where a server holds them (backend vllm or openai)."""
    spec = MODELS[name]
    if spec.backend != "local":
        return 0
    per_weight = (
        QUANTIZED_WEIGHT_BYTES.get(spec.quantization) or WEIGHT_BYTES[spec.dtype]
    )
    return math.ceil(spec.params_b * 1e9 * per_weight / 2**20)


def score_mem_mb(wildcards, attempt):
    """Host memory of a scoring job: the weights pass through host memory once while loading
    (a CPU fallback keeps them there), plus a quarter for buffers."""
    return attempt * (JOB_BASE_MB + math.ceil(1.25 * weights_mb(wildcards.model)))


def score_gpus(wildcards):
    """GPUs of a scoring job: the row's `gpus` for a vLLM server the job starts (its tensor-parallel size), none
    for an API row or a server the user runs (qclm.models.table.ModelSpec.job_gpus), one for a local row."""
    return MODELS[wildcards.model].job_gpus if wildcards.model in MODELS else 1


def score_runtime(wildcards, attempt):
    """Wall time (minutes) of a scoring job: every questionnaire x condition of one model, full
    protocol, on one GPU. Loading a 16B model from shared storage takes minutes; scoring about
    10 minutes per billion parameters on a slow GPU. Quantized models run slower."""
    spec = MODELS[wildcards.model]
    slower = 1.5 if spec.quantization else 1.0
    return attempt * (30 + math.ceil(10 * spec.params_b * slower))


def prepare_mem_mb(wildcards, attempt):
    """De-quantizing a GGUF file builds a float32 model and writes it: about 2.5 x float32 size."""
    params_b = MODELS[wildcards.model].params_b
    return attempt * (JOB_BASE_MB + math.ceil(2.5 * params_b * 1e9 * 4 / 2**20))


def prepare_runtime(wildcards, attempt):
    return attempt * (20 + math.ceil(10 * MODELS[wildcards.model].params_b))


def finetune_mem_mb(wildcards, attempt):
    """Host memory of a fine-tuning job: full fine-tuning holds the weights, their gradients and AdamW's two
    moments (4 x the weights) plus activations; LoRA the weights and small adapters."""
    spec = BASE_MODELS[wildcards.model]
    method = interventions.method_for(spec, FINETUNES[wildcards.intervention])
    return attempt * (JOB_BASE_MB + math.ceil((4.5 if method == "full" else 1.5) * weights_mb(wildcards.model)))


def finetune_runtime(wildcards, attempt):
    """Wall time (minutes): loading, then every epoch (a few hundred short texts: minutes per billion
    parameters on one GPU), and a checkpoint written per saved epoch."""
    spec, item = BASE_MODELS[wildcards.model], FINETUNES[wildcards.intervention]
    return attempt * (30 + math.ceil(10 * spec.params_b * (item.epochs + len(item.checkpoints))))
