"""Synonym sets shipped with crag-heuristic.

A data package: the ``*.txt`` files here are synonym files in the
Solr/Elasticsearch format (see ``README.md`` beside this file), read through
:mod:`importlib.resources` by ``SynonymSet.bundled()``:

``english.txt``
    general English, generated from WordNet 3.0 by
    ``tools/build_wordnet_synonyms.py`` (licence: ``WORDNET_LICENSE.txt``);
``biomedical.txt``, ``programming.txt``, ``finance.txt``
    curated domain sets.
"""
