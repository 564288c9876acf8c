"""Every model has a factory, and each factory's defaults make a row the model accepts."""

import inspect

import factory
import pytest
from django.apps import apps

from efficiency.services.tokens import api_token_check
from tests import factories

FACTORIES = [
    cls
    for _, cls in inspect.getmembers(factories, inspect.isclass)
    if issubclass(cls, factory.django.DjangoModelFactory) and cls.__module__ == factories.__name__
]


def test_every_model_of_the_portal_has_a_factory():
    models = {
        model
        for model in apps.get_app_config("efficiency").get_models()
        if not model.__name__.startswith("Historical")  # the audit trail's copies
    }
    assert models - {cls._meta.model for cls in FACTORIES} == set()


@pytest.mark.parametrize("factory_class", FACTORIES, ids=lambda cls: cls.__name__)
def test_a_factory_with_its_defaults_makes_a_valid_row(db, factory_class):
    row = factory_class()
    row.full_clean(validate_unique=False)
    assert type(row).objects.filter(pk=row.pk).exists()


def test_two_rows_from_one_factory_do_not_collide(db):
    for factory_class in FACTORIES:
        factory_class.create_batch(2)


def test_a_token_from_the_factory_authenticates_with_its_key(db):
    token = factories.ApiTokenFactory()
    assert api_token_check(key=token.key) == token
