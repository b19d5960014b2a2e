"""OpenAI MRCR (`mrcr/2needle`, `mrcr/4needle`, `mrcr/8needle`, `mrcr`): task.py.
"""
