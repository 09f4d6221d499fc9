"""A stand-in for the two scikit-learn names DGL's link-prediction example uses to score its
embeddings: ``linear_model.LogisticRegression`` and ``metrics.accuracy_score``.

scikit-learn is not a dependency of this project; the ported example keeps its sklearn imports
unchanged and finds this package first (the test puts ``tests/compat/examples`` on the trainers'
PYTHONPATH). The estimator is sklearn's default one (multinomial, L2 penalty with C=1.0,
L-BFGS), fitted with torch's L-BFGS.
"""
