"""Bad and odd inputs, driven through the real command line (issue "Robustness and security").

``cases`` builds each damaged input from a copy of the committed fixtures; the test modules hold
the catalogue of input errors (``test_errors``), the inputs that are odd but usable
(``test_degraded``) and the promises about what the tool writes (``test_data_safety``).
"""
