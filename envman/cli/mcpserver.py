"""The MCP server of ``envman mcp``: one tool per question of envman.app.mcp, their JSON schemas from the typed
signatures below (no ``from __future__ import annotations`` here: the SDK evaluates them). Every tool but
``write_uv_project`` is read-only, and annotated so; an EnvmanError becomes a tool error whose text is the CLI's
``error:`` and ``hint:`` lines. stdout is the protocol channel: nothing else may print there, which holds because
app/ never prints.
"""

from typing import Annotated, Any, Optional

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from envman import __version__
from envman.app import mcp as ask
from envman.errors import EnvmanError

INSTRUCTIONS = (
    "envman knows which driver/CUDA/cuDNN/framework/Python stack fits which NVIDIA GPUs (a cited matrix with each "
    "wheel's SASS list and driver floor), diagnoses machines, and estimates whether a training run fits in GPU "
    "memory. Ask install_command before installing torch or tensorflow, doctor when training fails on a "
    "machine, fit before choosing a GPU or a batch size. Targets are GPU names (h100, a100, rtx-4090, v100) or "
    "sm_XY; without targets, envman uses this machine's GPUs."
)
READING = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITING = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

Targets = Annotated[list[str], Field(description="GPUs: h100, a100, rtx-4090, v100, sm_89, 8.9 … "
                                                 "Empty: this machine's GPUs (NVML, else nvidia-smi).")]
Framework = Annotated[Optional[str], Field(description="torch, torch>=2.4, torch==2.5.*, tensorflow==2.15.*, "
                                                       "or an exact build: torch==2.14.1+cu126")]
Python = Annotated[Optional[str], Field(description="Python version or specifier: 3.11, >=3.10")]
Driver = Annotated[Optional[str], Field(description="NVIDIA driver version or the fleet's floor: 535.104.05, >=535")]
Cuda = Annotated[Optional[str], Field(description="CUDA requirement, e.g. >=12.4 for a custom extension")]
Cpu = Annotated[bool, Field(description="A CPU-only stack")]
Project = Annotated[str, Field(description="The project directory (absolute, or relative to where envman mcp runs)")]
Profile = Annotated[Optional[str], Field(description="A profile of envman.yaml (its lock: envman.P.lock)")]


def _answer(fn, *args, **kwargs):
    """Call a use case; its EnvmanError becomes the tool error the client sees, in the CLI's two lines."""
    from envman.redact import redact

    try:
        return fn(*args, **kwargs)
    except EnvmanError as err:
        raise ToolError(f"error: {redact(err.message)}" + (f"\nhint: {redact(err.hint)}" if err.hint else "")) from None


def _question(targets, framework, python, driver, cuda, cpu) -> ask.StackQuestion:
    return ask.StackQuestion(tuple(targets), framework, python, driver, cuda, cpu)


def build_server() -> MCPServer:
    server = MCPServer("envman", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(annotations=READING)
    def resolve_stack(targets: Targets = [], framework: Framework = None, python: Python = None,  # noqa: B006
                      driver: Driver = None, cuda: Cuda = None, cpu: Cpu = False) -> dict[str, Any]:
        """The newest consistent driver/CUDA/cuDNN/framework/Python stack for the target GPUs, with a note per
        choice (why this variant, why this Python). When none fits, the tool fails with the blocking constraint:
        ask explain_refusal for the alternatives."""
        return _answer(ask.resolve_answer, _question(targets, framework, python, driver, cuda, cpu))

    @server.tool(annotations=READING)
    def explain_refusal(targets: Targets = [], framework: Framework = None, python: Python = None,  # noqa: B006
                        driver: Driver = None, cuda: Cuda = None, cpu: Cpu = False) -> dict[str, Any]:
        """Why a stack is refused (e.g. torch==2.14.1+cu130 on a V100, or an H100 on driver 470) and what to
        change: the blocking constraints and the nearest alternatives, each with the change that makes it fit."""
        return _answer(ask.refusal_answer, _question(targets, framework, python, driver, cuda, cpu))

    @server.tool(annotations=READING)
    def doctor(project: Project = ".",
               facts_file: Annotated[Optional[str], Field(description="Judge a facts file recorded on another machine "
                                                          "(envman doctor --dump-facts F) instead of this one")] = None,
               deep: Annotated[bool, Field(description="Also import the framework in a subprocess (seconds)")] = False,
               ) -> dict[str, Any]:
        """The doctor's verdict for this machine (driver, GPUs, CUDA libraries, the Python environment, the
        project's lock) or for a facts file: findings with ids, severities and the command that fixes each."""
        return _answer(ask.doctor_answer, project, facts_file, deep)

    @server.tool(annotations=READING)
    def diagnose_dockerfile(paths: Annotated[list[str], Field(description="Dockerfiles, or project directories "
                                                              "(their own Dockerfiles)", min_length=1)],
                            project: Project = ".", targets: Targets = []) -> dict[str, Any]:  # noqa: B006
        """A Dockerfile judged before it is built: its base image, CUDA and the framework wheels it installs
        against the target GPUs (envman.yaml's targets, else this machine's): findings with the fix for each
        (`envman doctor --dockerfile --json`)."""
        return _answer(ask.dockerfile_answer, tuple(paths), project, tuple(targets))

    @server.tool(annotations=READING)
    def fit(model: Annotated[Optional[str], Field(description="A model id (llama-3.1-8b, qwen2.5-7b, gpt2, vit-base …) "
                                                  "or the path of a Hugging Face config.json")] = None,
            params: Annotated[Optional[int], Field(description="Parameter count, when there is no model id")] = None,
            stack: Annotated[Optional[str], Field(description="hf-trainer | accelerate | torch-amp | peft-lora | "
                                                  "peft-qlora | deepspeed-zero1/2/3[-offload] | fsdp2 | litgpt")] = None,
            method: Annotated[Optional[str], Field(description="full | lora | qlora | freeze (default: the stack's, "
                                                   "else full)")] = None,
            precision: Annotated[Optional[str], Field(description="fp32 | bf16 | fp16 | bf16-mixed | fp16-mixed "
                                                      "(default: the stack's)")] = None,
            optimizer: Annotated[Optional[str], Field(description="adamw | adamw-8bit | paged-adamw | sgd | "
                                                      "sgd-momentum | adafactor | lion")] = None,
            batch: Annotated[int, Field(description="Micro-batch per GPU", ge=1)] = 1,
            seq: Annotated[Optional[int], Field(description="Tokens per sample", ge=1)] = None,
            grad_checkpointing: Annotated[Optional[bool], Field(description="default: the stack's")] = None,
            lora_rank: Annotated[int, Field(ge=1)] = 16,
            gpus: Annotated[int, Field(description="Data-parallel GPUs", ge=1)] = 1,
            shard: Annotated[Optional[str], Field(description="none | ddp | zero1 | zero2 | zero3 | fsdp")] = None,
            attention: Annotated[str, Field(description="auto (SDPA, what transformers picks) | eager | flash")] = "auto",
            global_batch: Annotated[Optional[int], Field(ge=1)] = None,
            targets: Annotated[list[str], Field(description="GPUs to judge it on; empty: this machine's GPUs (if "
                                                "any) beside h100, a100, rtx-4090 and l4")] = [],  # noqa: B006
            ) -> dict[str, Any]:
        """Will this training run fit in GPU memory: the per-GPU peak and its breakdown (weights, gradients,
        optimizer, activations), fits/headroom/largest micro-batch per GPU, and ranked levers when it does not fit
        (`envman fit --json`)."""
        from envman.app.fit import DEFAULT_COMPARE, FitOptions

        opts = FitOptions(model=model, params=params, stack=stack, method=method, precision=precision,
                          optimizer=optimizer, batch=batch, seq=seq, grad_checkpointing=grad_checkpointing,
                          lora_rank=lora_rank, gpus=gpus, shard=shard, attention=attention, global_batch=global_batch,
                          targets=tuple(targets), compare=() if targets else DEFAULT_COMPARE)
        return _answer(ask.fit_answer, opts)

    @server.tool(annotations=READING)
    def install_command(framework: Framework = "torch",
                        companions: Annotated[list[str], Field(description="torchvision, torchaudio")] = [],  # noqa: B006
                        targets: Targets = [], python: Python = None, driver: Driver = None,  # noqa: B006
                        cpu: Cpu = False) -> dict[str, Any]:
        """The pip and uv command lines that install the framework build that fits these GPUs (this machine's by
        default), pinned exactly and with the variant's own index — ask this before running pip install torch."""
        return _answer(ask.install_answer, _question(targets, framework, python, driver, None, cpu), tuple(companions))

    @server.tool(annotations=READING)
    def uv_project_diff(project: Project = ".",
                        profile: Profile = None) -> dict[str, Any]:
        """What `envman uv write` would change in a uv project's pyproject.toml so that `uv sync` installs envman's
        locked framework build (index, sources, versions, requires-python), as a diff. Writes nothing."""
        return _answer(ask.uv_project_answer, project, profile)

    @server.tool(annotations=WRITING)
    def write_uv_project(project: Project = ".",
                         profile: Profile = None) -> dict[str, Any]:
        """WRITES the project's pyproject.toml: envman's locked framework index, sources, versions and
        requires-python (what uv_project_diff shows). Comments and formatting are kept. Ask the user first."""
        return _answer(ask.write_uv_project, project, profile)

    return server
