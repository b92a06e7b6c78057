"""One lock on a cluster: the image in the forms cluster runtimes take (OCI layout and archive, an OCI runtime
bundle, an enroot squashfs, an Apptainer definition), the scheduler files (Slurm sbatch for pyxis, Apptainer and
Slurm's own OCI support; a Kubernetes Job and a Kubeflow Trainer TrainJob), and the same preflight on every node.

PURE: plan.py (names, image references, the job's shape, the commands), slurm.py, k8s.py, affinity.py, enroot.py
and nodes.py compute every value from plain inputs. IO: site.py (envman.yaml's ``cluster:``), export.py (skopeo,
umoci, mksquashfs, apptainer), render.py (templates/cluster/*, strict Jinja; YAML by serializer).
"""
