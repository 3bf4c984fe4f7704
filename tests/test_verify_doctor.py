"""`gpuwise doctor` on broken machines, played through an injected Probe."""

from __future__ import annotations

from typing import Any

from gpuwise.verify.doctor import Probe, diagnose
from tests.verify_fakes import FIXTURES

SMI_XML = (FIXTURES / "h100x2_smi.xml").read_text(encoding="utf-8")
CUDA_TORCH = {"torch_version": "2.13.0", "torch_cuda": "12.8", "cuda_available": True,
              "cuda_device_count": 2, "nccl_version": "2.27.5", "cuda_visible_devices": None}


def probe(files: dict[str, str] | None = None, cmds: dict[str, Any] | None = None,
          env: dict[str, str] | None = None, torch: dict[str, Any] | None = None,
          devices: tuple[str, ...] = ("/dev/nvidia-uvm",), platform: str = "linux") -> Probe:
    files = files if files is not None else {"/proc/driver/nvidia/version":
                                             "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15"}
    cmds = cmds if cmds is not None else {"nvidia-smi": (0, SMI_XML)}

    def run(cmd: list[str]) -> tuple[int, str] | None:
        value = cmds.get(cmd[0])
        return value if value is None or isinstance(value, tuple) else (0, value)

    return Probe(read=files.get, run=run, env=env or {},
                 torch_info=lambda: dict(torch if torch is not None else CUDA_TORCH),
                 exists=lambda path: path in devices, platform=platform)


def ids(report: Any) -> dict[str, str]:
    return {f.id: f.severity for f in report.findings}


def test_a_healthy_machine_has_no_errors() -> None:
    report = diagnose(probe())
    # no nvcc on the path is information, not a problem (prebuilt wheels run)
    assert report.ok and ids(report) == {"driver": "ok", "nvidia_smi": "ok", "torch": "ok", "no_nvcc": "info"}


def test_no_driver_and_no_module_is_an_error_with_install_advice() -> None:
    report = diagnose(probe(files={}, cmds={"lsmod": "Module  Size  Used by\nsnd 1 0\n",
                                            "lspci": "01:00.0 3D controller: NVIDIA Corporation"}))
    finding = next(f for f in report.findings if f.id == "no_driver")
    assert not report.ok and "modprobe nvidia" in finding.fix.en and "安装驱动" in finding.fix.zh
    assert "no_nvidia_smi" in ids(report)


def test_no_nvidia_device_on_the_bus_is_named() -> None:
    report = diagnose(probe(files={}, cmds={"lspci": "", "lsmod": ""}))
    assert ids(report)["no_nvidia_device"] == "error"


def test_secure_boot_blocking_the_module_is_explained() -> None:
    cmds = {"lsmod": "", "mokutil": "SecureBoot enabled\n",
            "dmesg": "nvidia: module verification failed: signature and/or required key missing"}
    report = diagnose(probe(files={}, cmds=cmds))
    finding = next(f for f in report.findings if f.id == "secure_boot")
    assert "mokutil --import" in finding.fix.en and "module verification failed" in finding.evidence


def test_a_driver_library_mismatch_says_reboot() -> None:
    cmds = {"nvidia-smi": (18, "Failed to initialize NVML: Driver/library version mismatch")}
    finding = next(f for f in diagnose(probe(cmds=cmds)).findings if f.id == "nvidia_smi_failed")
    assert "reboot" in finding.fix.en


def test_a_cpu_only_torch_gets_the_exact_pip_command_for_the_driver() -> None:
    cpu = {**CUDA_TORCH, "torch_version": "2.13.0+cpu", "torch_cuda": None, "cuda_available": False}
    report = diagnose(probe(torch=cpu))
    finding = next(f for f in report.findings if f.id == "torch_cpu_only")
    # the fixture's driver supports CUDA 12.4: the newest wheel it can run is cu126? no: <= 12.4
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126" in finding.fix.en
    smi_128 = SMI_XML.replace("<cuda_version>12.4</cuda_version>", "<cuda_version>12.8</cuda_version>")
    report = diagnose(probe(cmds={"nvidia-smi": (0, smi_128)}, torch=cpu))
    finding = next(f for f in report.findings if f.id == "torch_cpu_only")
    assert "--index-url https://download.pytorch.org/whl/cu128" in finding.fix.en


def test_a_driver_too_old_for_torchs_cuda_is_an_error() -> None:
    smi_118 = SMI_XML.replace("<cuda_version>12.4</cuda_version>", "<cuda_version>11.8</cuda_version>")
    report = diagnose(probe(cmds={"nvidia-smi": (0, smi_118)}))
    finding = next(f for f in report.findings if f.id == "driver_too_old")
    assert "570.26" in finding.fix.en


def test_an_x_server_holding_the_gpu_is_a_warning() -> None:
    xml = (FIXTURES / "rtx4090_smi.xml").read_text(encoding="utf-8")
    report = diagnose(probe(cmds={"nvidia-smi": (0, xml)}))
    finding = next(f for f in report.findings if f.id == "x_server")
    assert "Xorg" in finding.title.en and "multi-user.target" in finding.fix.en


def test_cuda_visible_devices_hiding_gpus_is_reported() -> None:
    assert ids(diagnose(probe(env={"CUDA_VISIBLE_DEVICES": ""})))["cuda_visible_none"] == "error"
    assert ids(diagnose(probe(env={"CUDA_VISIBLE_DEVICES": "1"})))["cuda_visible_some"] == "warn"
    assert "cuda_visible_some" not in ids(diagnose(probe(env={"CUDA_VISIBLE_DEVICES": "0,1"})))


def test_every_finding_has_english_and_chinese() -> None:
    report = diagnose(probe(files={}, cmds={"lsmod": ""}, env={"CUDA_VISIBLE_DEVICES": "-1"}))
    for f in report.findings:
        assert f.title.en and f.title.zh and (f.fix is None or (f.fix.en and f.fix.zh))
    assert report.to_dict()["schema_version"] == 1


def test_nouveau_loaded_is_an_error_with_the_blacklist_steps() -> None:
    report = diagnose(probe(cmds={"nvidia-smi": (0, SMI_XML), "lsmod": "nouveau 2461696 0\nvideo 69632 1 nouveau\n"}))
    assert ids(report)["nouveau"] == "error"
    fix = next(f.fix for f in report.findings if f.id == "nouveau")
    assert fix is not None and "blacklist nouveau" in fix.en and "update-initramfs" in fix.zh


def test_a_dkms_module_built_for_another_kernel_says_rebuild() -> None:
    status = "nvidia/570.124.06, 6.8.0-45-generic, x86_64: installed\n"
    report = diagnose(probe(files={}, cmds={"dkms": status, "uname": "6.8.0-49-generic\n", "lsmod": ""}))
    assert ids(report)["dkms_mismatch"] == "error"
    assert "linux-headers-6.8.0-49-generic" in next(f.fix.en for f in report.findings
                                                    if f.id == "dkms_mismatch" and f.fix)
    same = diagnose(probe(cmds={"nvidia-smi": (0, SMI_XML), "dkms": status, "uname": "6.8.0-45-generic"}))
    assert "dkms_mismatch" not in ids(same)


def test_a_missing_nvcc_is_information_and_a_mismatched_one_warns() -> None:
    assert ids(diagnose(probe()))["no_nvcc"] == "info"
    old = "Cuda compilation tools, release 11.8, V11.8.89"
    assert ids(diagnose(probe(cmds={"nvidia-smi": (0, SMI_XML), "nvcc": old})))["nvcc_mismatch"] == "warn"
    same = "Cuda compilation tools, release 12.8, V12.8.61"
    found = ids(diagnose(probe(cmds={"nvidia-smi": (0, SMI_XML), "nvcc": same})))
    assert "no_nvcc" not in found and "nvcc_mismatch" not in found


def test_a_missing_dev_nvidia_uvm_is_an_error() -> None:
    assert ids(diagnose(probe(devices=())))["no_nvidia_uvm"] == "error"
    assert "no_nvidia_uvm" not in ids(diagnose(probe()))


def test_windows_gets_the_tdr_and_directml_guidance() -> None:
    report = diagnose(probe(platform="win32"))
    assert ids(report)["windows_tdr"] == "info" and ids(report)["directml"] == "info"
    tdr = next(f for f in report.findings if f.id == "windows_tdr")
    assert "GPU crash dump triggered" in tdr.title.en and "TdrDelay" in (tdr.fix.en if tdr.fix else "")
    assert "windows_tdr" not in ids(diagnose(probe()))
