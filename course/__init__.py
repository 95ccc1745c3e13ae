"""Teaching content: the words the app teaches with, apart from the code that computes them (analysis/) and draws
them (viz/, views/).

The Lesson's paragraphs are plain markdown files in `course/steps/`, one per step, so that a teacher can read,
edit and review them without reading Python; `course.lesson` says in which order they come and which model each
step's live view needs.
"""
