"""The GPU models the simulator knows, as the NVIDIA DRA driver describes them.

A `GpuModel` carries what the driver publishes for a whole GPU (product name, brand,
architecture, compute capability, driver and CUDA versions, memory) and its MIG profiles; a
`MigProfile` is one GPU instance profile of `nvidia-smi mig -lgip` with its placements
(`-lgipp`). `GPU_MODELS` names them by profile key, as scenario files do; `PROFILES` adds the
NIC profile of the CNI DRA driver.

The H200 numbers are transcribed from `../shared/hardware/h200/` (nvidia-smi of a real H200);
each constant says which file it comes from. `tests/sim/test_world_hardware.py` parses those
files and checks the transcription. The A100 and H100 come from the real nodes quoted in
`../shared/fixtures/upstream/SOURCES.md`.

Promises: pure data.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "A100_80GB_PCIE",
    "GPU_MODELS",
    "H100_80GB_HBM3",
    "H200",
    "H200_MIG_PROFILES",
    "NIC_PROFILE",
    "PROFILES",
    "GpuModel",
    "MigProfile",
]


@dataclass(frozen=True)
class MigProfile:
    """One GPU instance profile of `nvidia-smi mig -lgip` with its placements (`-lgipp`)."""

    name: str  # "1g.18gb"
    gi_id: int  # GPU instance profile id
    starts: tuple[int, ...]  # placement starts, in memory slices
    size: int  # memory slices per placement
    memory_mib: int  # "Memory GiB" column times 1024
    multiprocessors: int  # SM
    copy_engines: int  # CE
    decoders: int  # DEC
    encoders: int  # ENC
    jpeg_engines: int  # JPEG
    ofa_engines: int  # OFA

    def device_name(self, minor: int, start: int) -> str:
        # The driver drops the dots and replaces what RFC 1123 forbids ("+me") with "-".
        compact = self.name.replace(".", "").replace("+", "-").lower()
        return f"gpu-{minor}-mig-{compact}-{self.gi_id}-{start}"

    def capacities(self) -> dict[str, int]:
        return {
            "multiprocessors": self.multiprocessors,
            "copyEngines": self.copy_engines,
            "decoders": self.decoders,
            "encoders": self.encoders,
            "jpegEngines": self.jpeg_engines,
            "ofaEngines": self.ofa_engines,
        }


@dataclass(frozen=True)
class GpuModel:
    """A GPU model as the NVIDIA DRA driver describes it."""

    key: str
    product_name: str
    brand: str
    architecture: str
    compute_capability: str  # semver, as the driver publishes it
    driver_version: str  # semver (Masterminds parses "580.159.04" to 580.159.4)
    cuda_driver_version: str
    memory: str  # whole-GPU capacity, Kubernetes quantity
    addressing_mode: str | None = None
    mig_profiles: tuple[MigProfile, ...] = ()
    memory_slices: int = 0
    real_uuid: str | None = None  # the captured GPU's uuid, used for the first GPU built
    bus_base: int = 6  # PCI device number of GPU 0 (0000:00:06.0 on the captured VM)


# ---- NVIDIA H200, from ../shared/hardware/h200/ ------------------------------------------------

# mig-lgip.txt (SM, DEC, ENC / CE, JPEG, OFA and Memory GiB columns) and
# mig-lgipp.txt ("Profile ID 15 Placements: {0,2,4,6}:2" = starts and size).
H200_MIG_PROFILES = (
    MigProfile("1g.18gb", 19, (0, 1, 2, 3, 4, 5, 6), 1, 16384, 16, 1, 1, 0, 1, 0),
    MigProfile("1g.18gb+me", 20, (0, 1, 2, 3, 4, 5, 6), 1, 16384, 16, 1, 1, 0, 1, 1),
    MigProfile("1g.35gb", 15, (0, 2, 4, 6), 2, 33280, 26, 1, 1, 0, 1, 0),
    MigProfile("2g.35gb", 14, (0, 2, 4), 2, 33280, 32, 2, 2, 0, 2, 0),
    MigProfile("3g.71gb", 9, (0, 4), 4, 71424, 60, 3, 3, 0, 3, 0),
    MigProfile("4g.71gb", 5, (0,), 4, 71424, 64, 4, 4, 0, 4, 0),
    MigProfile("7g.141gb", 0, (0,), 8, 143360, 132, 8, 7, 0, 7, 1),
)

H200 = GpuModel(
    key="nvidia-h200",
    product_name="NVIDIA H200",  # nvidia-smi-q.txt "Product Name"
    brand="Nvidia",  # NVML's brand name for "Product Brand: NVIDIA" (what the driver publishes)
    architecture="Hopper",  # nvidia-smi-q.txt "Product Architecture"
    compute_capability="9.0.0",  # nvidia-smi-query.csv compute_cap "9.0"
    driver_version="580.159.4",  # nvidia-smi-query.csv driver_version "580.159.04"
    cuda_driver_version="13.0.0",  # nvidia-smi-q.txt "CUDA Version : 13.0"
    memory="143771Mi",  # nvidia-smi-q.txt "FB Memory Usage / Total : 143771 MiB"
    addressing_mode="None",  # nvidia-smi-q.txt "Addressing Mode : None"
    mig_profiles=H200_MIG_PROFILES,
    memory_slices=8,  # mig-lgipp.txt: the 7g.141gb placement {0}:8 spans every slice
    real_uuid="GPU-21f6a090-a7a1-f57a-27f8-e0da547eb43a",  # nvidia-smi-query.csv uuid
    bus_base=6,  # nvidia-smi-query.csv pci.bus_id "00000000:00:06.0"
)

# The AKS nodes of kubernetes-sigs/dra-driver-nvidia-gpu#719 (SOURCES.md), MIG disabled.
A100_80GB_PCIE = GpuModel(
    key="nvidia-a100-80gb-pcie",
    product_name="NVIDIA A100 80GB PCIe",
    brand="Nvidia",
    architecture="Ampere",
    compute_capability="8.0.0",
    driver_version="580.95.5",
    cuda_driver_version="13.0.0",
    memory="80Gi",
    bus_base=1,
)

# The EKS H100 node quoted in SOURCES.md.
H100_80GB_HBM3 = GpuModel(
    key="nvidia-h100-80gb-hbm3",
    product_name="NVIDIA H100 80GB HBM3",
    brand="Nvidia",
    architecture="Hopper",
    compute_capability="9.0.0",
    driver_version="580.105.8",
    cuda_driver_version="13.0.0",
    memory="81559Mi",
    bus_base=0x53,
)

GPU_MODELS = {m.key: m for m in (H200, A100_80GB_PCIE, H100_80GB_HBM3)}
NIC_PROFILE = "cni-nic"
PROFILES = (*GPU_MODELS, NIC_PROFILE)
