"""The `rspu:` uncertainty functions: distribution literals and exact probabilities."""
from .distributions import Distribution, Family, FamilyRegistry, UncertaintyError, default_families
from .functions import DISTRIBUTION_DATATYPE, FUNCTION_NAMES, FUNCTIONS, CallCounts, FunctionLibrary, RspuFunction

__all__ = ["Distribution", "Family", "FamilyRegistry", "UncertaintyError", "default_families",
           "DISTRIBUTION_DATATYPE", "FUNCTION_NAMES", "FUNCTIONS", "CallCounts", "FunctionLibrary", "RspuFunction"]
