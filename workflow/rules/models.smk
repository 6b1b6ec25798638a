# Embedded and GGUF models are de-quantized once into safetensors directories.


rule prepare_model:
    conda:
        "../../environment.yml"
    output:
        f"{MODELS_DIR}/{{model}}/qclm_prepared.json",
    params:
        model=model_row,
    log:
        f"{LOGS}/prepare_model/{{model}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/prepare_model/{{model}}.tsv"
    threads: 4
    resources:
        mem_mb=prepare_mem_mb,
        runtime=prepare_runtime,
    script:
        "../scripts/prepare_model.py"
