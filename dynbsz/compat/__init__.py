"""Adapters that put other projects' packers behind dynbsz's ``Packer`` protocol."""
