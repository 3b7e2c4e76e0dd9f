"""The files shipped with Encoderscope (installed as the package ``encoderscope_assets``; read through core/assets.py)."""
