"""The Lesson's steps (views/lesson.py), a module per part of the course: the paper's ideas (paper.py), the cost of
attention (cost.py) and the induction heads (induction.py); layout.py holds what every step draws with."""
