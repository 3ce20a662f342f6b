"""placeholder"""
from dataclasses import dataclass
@dataclass
class ExportReport:
    pass
def export_home(t, out):
    raise NotImplementedError
