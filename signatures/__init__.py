"""The DSPy Signatures: every judgment of the CRAG program, by name.

Docstrings are the instructions the optimizers start from (docs/how-it-works.md).
"""

from signatures.answering import AnswerClosedBook, GenerateAnswer, GenerateStrictAnswer
from signatures.baseline import GradeDocumentBinary, RewriteForWebSearch
from signatures.conversing import StandaloneQuestion
from signatures.deciding import DecideRetrieval
from signatures.grading import GradeRetrieval, StripRelevance
from signatures.rewriting import RewriteQuery
from signatures.support import CheckClaimSupport, ExtractClaims, JudgeUsefulness
from signatures.synthesis import WriteQuestion

__all__ = [
    "AnswerClosedBook",
    "CheckClaimSupport",
    "DecideRetrieval",
    "ExtractClaims",
    "GenerateAnswer",
    "GenerateStrictAnswer",
    "GradeDocumentBinary",
    "GradeRetrieval",
    "JudgeUsefulness",
    "RewriteForWebSearch",
    "RewriteQuery",
    "StandaloneQuestion",
    "StripRelevance",
    "WriteQuestion",
]
