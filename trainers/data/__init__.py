"""Corpus ingestion and packing methods that turn documents into training sequences."""
