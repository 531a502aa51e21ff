"""Differentially private sentence rewriting: ER-AE, AE-DP, SynTF and Random-R (extra ``[generation]``).
"""
