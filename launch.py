"""The one entry point: compose conf/ with Hydra, build the Run it describes, and call it.

    python launch.py mode=dry data=synthetic
    python launch.py algorithm=madpo_iter comparator=history1
    python launch.py --multirun seed=1,2,3 hydra/launcher=submitit_slurm
"""

import sys
import warnings

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig

from travel.algorithms.core.registry import load_algorithms

# conf/hydra/launcher/submitit_*.yaml fill the plugin's schema from the hardware option; Hydra still
# validates them against that schema and warns that same-name matching is deprecated.
warnings.filterwarnings("ignore", message=r"(?s).*is validated against ConfigStore schema with the same name")
# every algorithm YAML's module, also from directories the command line adds to the search path: their
# experiment presets join the config search (conf/config.yaml's defaults list)
load_algorithms(sys.argv[1:])


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig):
    run = instantiate(cfg.run, cfg=cfg, _recursive_=False)
    return run()


if __name__ == "__main__":
    main()
