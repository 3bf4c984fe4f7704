"""Diffusion image and video models (text encoders, denoiser, VAE) and vision-language image
tokens: description, memory, speed, plan. Pure; the shells call `gpuwise.diffusion.service`."""
