"""Train ``jax-pmean`` on two XLA host devices one step per dispatch and ``K`` steps per
dispatch (a loop on the devices, with a shorter last dispatch); print what each ended with."""

from __future__ import annotations

import json
import sys

from accelml.dl.config import TrainingConfig
from accelml.dl.data import load_image_data
from accelml.dl.strategies.jax_steps import train


def main(per_dispatch: list[int]) -> None:
    data = load_image_data("digits")
    out = {}
    for count in per_dispatch:
        config = TrainingConfig(model="mlp", dataset="digits", strategy="jax-pmean",
                                ranks=2, batch_size=32, epochs=2, learning_rate=0.05,
                                steps_per_execution=count)
        result = train(config, data)
        out[str(count)] = {"path": result.path, "steps": result.steps_per_epoch,
                           "losses": [e.loss for e in result.epochs],
                           "ranks_agree": result.ranks_agree,
                           "images": [e.images for e in result.epochs],
                           "test_accuracy": result.test_accuracy}
    print(json.dumps(out))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]])
