"""KernelBench level 3 problem 1 (an MLP: Linear + ReLU twice, then a Linear) at its current (head) size (the
problem as KernelBench states it; the file written here for the verifier's benchmark).

Device memory: input 128 x 16384 fp32 = 0.008 GB, output 128 x 8192 = 0.004 GB; inputs and outputs 0.0126
GB. The weights dominate: 16384 x 16384 twice, 8192 x 16384 and the biases, 2.68 GB in each model's copy."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size: int, layer_sizes: list, output_size: int):
        super().__init__()
        layers: list[nn.Module] = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


batch_size = 128
input_size = 16384
layer_sizes = [16384, 16384]
output_size = 8192


def get_inputs():
    return [torch.rand(batch_size, input_size)]


def get_init_inputs():
    return [input_size, layer_sizes, output_size]
